"""What every route of the query API reads, kept on the app (``app.state.api``) by
:func:`query_dsl.http.api.create_app`: the routes are module-level (``api.py``,
``prom_api.py``, ``web.py``) and reach the source, the limits, the token, the latency
metrics, the dashboards, the process's memory budget and where Prometheus's requests run
through the dependencies here."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from query_dsl.budget import MemoryBudget, QueryBudget
from query_dsl.dashboards import DashboardDirectory
from query_dsl.evaluator import Limits
from query_dsl.http.placement import Placement
from query_dsl.http.self_metrics import ApiMetrics
from query_dsl.sources import DataSource

__all__ = ["Api", "ApiContext", "api_context", "authorize"]


@dataclass(frozen=True)
class ApiContext:
    """One app's: where it reads, its query limits (``None``: the evaluator's defaults), its
    bearer token (``None``: open), its own latency metrics, its saved dashboards (``None``:
    no directory configured), the memory budget all its queries share, and where the requests
    of Prometheus's API run (:mod:`query_dsl.http.placement`)."""

    source: DataSource
    limits: Limits | None
    token: str | None
    metrics: ApiMetrics
    dashboards: DashboardDirectory | None
    budget: MemoryBudget
    placement: Placement

    def query_budget(self, *, wait: bool = True) -> QueryBudget:
        """A budget for one query: its limits' ``max_bytes``, drawn from the app's (waiting
        for its bytes unless ``wait`` is false: a query on the event loop)."""
        return self.budget.query((self.limits or Limits()).max_bytes, wait=wait)


async def api_context(request: Request) -> ApiContext:
    """The context of the app serving ``request`` (a dependency)."""
    context: ApiContext = request.app.state.api
    return context


Api = Annotated[ApiContext, Depends(api_context)]  # a route's parameter: ``api: Api``


async def authorize(request: Request) -> None:
    """The token check (a dependency): 401 unless the app is open or the request carries
    ``Authorization: Bearer <token>``."""
    token = (await api_context(request)).token
    if token is None:
        return
    given = request.headers.get("authorization", "")
    if not secrets.compare_digest(given.encode(), f"Bearer {token}".encode()):
        raise HTTPException(status_code=401, detail="a valid bearer token is required")
