"""The HTTP query API (FastAPI): ``POST /api/v1/query``, ``GET /api/v1/series``,
``/api/v1/labels``, ``/api/v1/label/{name}/values`` (a parameter they do not know is a 400:
a misspelt filter must not widen an answer); OpenAPI at ``/openapi.json``; the
dashboard page at ``/`` with its endpoints (:mod:`query_dsl.http.web`); Prometheus's API and
PromQL under ``/prometheus`` (:mod:`query_dsl.http.prom_api`); ``GET /metrics`` (query
latencies and the process, Prometheus text: :mod:`query_dsl.http.self_metrics`) and ``GET /health``,
open without the token (they hold no series data).

Every answer is JSON (``?format=csv`` for a query gives CSV: a row per series and instant);
a query's is written by :mod:`query_dsl.http.answer`, NaN and ±Inf as null.
Errors are ``{"error": {"kind", "message", "line", "column"}}`` with 400 (the query is
wrong), 404 (no such dashboard), 422 (the request is malformed), 413 (a limit was hit, or a
request body over ``MAX_BODY_BYTES``: :mod:`query_dsl.http.body_limit`, before it is read), 401
(a bearer token is configured and missing or wrong) or 503 with ``Retry-After`` (the process's
memory budget stayed spent: :mod:`query_dsl.budget`). Queries are at most 10,000 characters; a
query runs at most ``limits.timeout_s`` within ``limits.max_bytes``.
"""

from __future__ import annotations

import csv
import gc
import io
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, Field
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from bookkeeper.ground import Immediate
from query_dsl.budget import MemoryBudget, QueryBudget
from query_dsl.dashboards import DashboardDirectory
from query_dsl.evaluator import Evaluator, Limits
from query_dsl.exceptions import QueryError, QueryLimitError
from query_dsl.http.answer import encode_answer, strings_answer
from query_dsl.http.body_limit import BodyLimitMiddleware
from query_dsl.http.context import Api, ApiContext, authorize
from query_dsl.http.errors import error_response as _error
from query_dsl.http.errors import limit_response
from query_dsl.http.placement import Placement
from query_dsl.http.prom_api import prometheus_router
from query_dsl.http.prom_fast import PrometheusFastPath
from query_dsl.http.self_metrics import ApiMetrics, BudgetMetrics, Collector, PlacementMetrics
from query_dsl.http.web import web_router
from query_dsl.matrix import Matrix
from query_dsl.parser import MAX_QUERY_LENGTH
from query_dsl.sources import DataSource
from vhms import LimitExceededError, LocalClient, VhmsError

__all__ = ["QueryRequest", "create_app", "query_router", "to_csv"]

JSON_POINT_BYTES = 48  # an answered point: its JSON text, orjson's and the text rows' buffers
CSV_POINT_BYTES = 400  # a CSV row: the csv writer's Python strings and the text


class QueryRequest(BaseModel):
    query: str = Field(..., max_length=MAX_QUERY_LENGTH, description="a query in the Artimon DSL")
    start: int | None = Field(None, ge=0, le=2**53, description="default range start, epoch ms (end - 1 h)")
    end: int | None = Field(None, ge=0, le=2**53, description="default range end, epoch ms (now)")


class SeriesAnswer(BaseModel):
    name: str
    labels: dict[str, str]
    timestamps: list[int]
    values: list[float | None]


class StringAnswer(BaseModel):
    name: str
    labels: dict[str, str]
    value: str
    timestamp: int


class QueryAnswer(BaseModel):
    series: list[SeriesAnswer] | None = None
    scalar: float | None = None
    step_ms: int | None = None
    took_ms: float
    warnings: list[str] = Field(
        default_factory=list, description="why (parts of) the answer are empty, where that is known"
    )
    strings: list[StringAnswer] = Field(
        default_factory=list, description="the last value of the STRING series the query fetched"
    )


class ErrorDetail(BaseModel):
    kind: str
    message: str
    line: int | None = None
    column: int | None = None


class ErrorAnswer(BaseModel):
    error: ErrorDetail


def _only(*allowed: str) -> Callable[[Request], None]:
    """A dependency refusing query parameters other than ``allowed`` (400 naming them): a
    misspelt filter must not silently widen an answer."""

    def check(request: Request) -> None:
        unknown = sorted(set(request.query_params) - set(allowed))
        if unknown:
            accepted = ", ".join(allowed) or "none"
            raise HTTPException(
                status_code=400, detail=f"unknown parameter {', '.join(unknown)} (accepted: {accepted})"
            )

    return check


query_router = APIRouter()


@query_router.post(
    "/api/v1/query",
    response_model=QueryAnswer,
    responses={
        200: {
            "content": {"text/csv": {"schema": {"type": "string"}}},
            "description": "the answer: JSON, or CSV with ?format=csv",
        }
    },
    dependencies=[Depends(authorize)],
)
def query(body: QueryRequest, api: Api, format: str = Query("json", pattern="^(json|csv)$")) -> Response:
    budget = api.query_budget()
    try:
        answer = _answer(body, api, format, budget)
    except BaseException:
        budget.close()
        raise
    answer.background = BackgroundTask(budget.close)  # held until the answer is sent
    return answer


def _answer(body: QueryRequest, api: ApiContext, format: str, budget: QueryBudget) -> Response:
    """``query``'s answer, its steps and its text charged to ``budget``."""
    started = time.perf_counter()
    evaluator = Evaluator(api.source, start_ms=body.start, end_ms=body.end, limits=api.limits, budget=budget)
    try:
        result = evaluator.evaluate(body.query)
        points = result.values.size if isinstance(result, Matrix) else 1
        budget.need(points * (CSV_POINT_BYTES if format == "csv" else JSON_POINT_BYTES), "the answer")
    except QueryError as exc:
        api.metrics.observe(time.perf_counter() - started, ok=False)
        return limit_response(exc)
    except (VhmsError, ValueError) as exc:
        api.metrics.observe(time.perf_counter() - started, ok=False)
        return _error(400, exc)
    api.metrics.observe(time.perf_counter() - started, ok=True)
    took = (time.perf_counter() - started) * 1000
    if format == "csv":
        return PlainTextResponse(to_csv(result), media_type="text/csv")
    # written by columns, not validated against QueryAnswer (which documents it): a
    # wide answer would cost more to validate than to compute
    return Response(
        encode_answer(result, took, evaluator.warnings, evaluator.strings), media_type="application/json"
    )


# operational, no series data: open like VHMS's /health, for the scrapers of the site
@query_router.get("/metrics", include_in_schema=False)
def own_metrics(api: Api) -> PlainTextResponse:
    return PlainTextResponse(api.metrics.text(), media_type="text/plain; version=0.0.4")


@query_router.get("/health", include_in_schema=False)
def health() -> dict[str, str]:
    return {"status": "ok"}


@query_router.get("/api/v1/series", dependencies=[Depends(authorize), Depends(_only("match", "match[]"))])
def series(
    api: Api,
    match: str | None = Query(None, max_length=MAX_QUERY_LENGTH, description="a selector"),
    matches: Annotated[
        list[str] | None,
        Query(alias="match[]", max_length=MAX_QUERY_LENGTH, description="selectors (Prometheus's form)"),
    ] = None,
) -> Response:
    selectors = [*([match] if match is not None else []), *(matches or [])]
    if not selectors:
        return _error(400, QueryError("give a selector: match=SELECTOR ({} for every series)"))
    try:
        found = sorted({key for selector in selectors for key in api.source.series(selector)})
    except LimitExceededError as exc:
        return _error(413, QueryLimitError(str(exc)))
    except (VhmsError, ValueError) as exc:
        return _error(400, exc)
    return JSONResponse({"series": found})


@query_router.get("/api/v1/strings", dependencies=[Depends(authorize), Depends(_only("match"))])
def strings(
    api: Api, match: str = Query(..., max_length=MAX_QUERY_LENGTH, description="a selector")
) -> Response:
    """The last value and its time of each STRING series the selector picks."""
    try:
        return JSONResponse({"strings": strings_answer(api.source.strings(match))})
    except LimitExceededError as exc:
        return _error(413, QueryLimitError(str(exc)))
    except (VhmsError, ValueError) as exc:
        return _error(400, exc)


@query_router.get("/api/v1/labels", dependencies=[Depends(authorize), Depends(_only())])
def labels(api: Api) -> dict[str, list[str]]:
    return {"labels": api.source.label_names()}


@query_router.get("/api/v1/label/{name}/values", dependencies=[Depends(authorize), Depends(_only())])
def label_values(name: str, api: Api) -> dict[str, list[str]]:
    return {"values": api.source.label_values(name)}


def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    return JSONResponse(
        {"error": {"kind": "HTTPException", "message": str(exc.detail)}}, status_code=exc.status_code
    )


def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    # FastAPI's own handler echoes the input back and fails (500) on a body that is not UTF-8
    where = "; ".join(
        f"{'.'.join(str(part) for part in error.get('loc', ()))}: {error.get('msg', '')}"
        for error in exc.errors()
    )
    return JSONResponse(
        {"error": {"kind": "RequestValidationError", "message": where[:1000]}}, status_code=422
    )


@asynccontextmanager
async def _serving(app: FastAPI) -> AsyncIterator[None]:
    """Before the first request, the heap built so far (imports, the app, a store loaded in
    process) is frozen out of the cyclic collector's walks: it lives as long as the process,
    and every older-generation collection walked it again (a fifth of a small query's CPU).
    Garbage is collected first: what is frozen is never collected."""
    gc.collect()
    gc.freeze()
    yield


class QueryApi(FastAPI):
    """FastAPI with Prometheus's routes answered in front of it, before its middleware
    (:mod:`query_dsl.http.prom_fast`); what the routes read on ``state.api``."""

    def __init__(self, api: ApiContext, **options: Any) -> None:
        super().__init__(**options)
        self.state.api = api
        self.fast_path = PrometheusFastPath(api)

    def answer_now(self, scope: Scope) -> Immediate | None:
        """A small answer of Prometheus's routes at once (:mod:`bookkeeper.ground.immediate`)."""
        return self.fast_path.answer_now(scope)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.fast_path.route(scope)
        if route is None:
            await super().__call__(scope, receive, send)
        else:
            await self.fast_path.answer(route, scope, receive, send)


def create_app(
    source: DataSource,
    *,
    token: str | None = None,
    limits: Limits | None = None,
    dashboards_dir: Path | None = None,
    extra_metrics: Sequence[Collector] = (),
    budget: MemoryBudget | None = None,
) -> FastAPI:
    """The API over ``source`` (a VHMS client: :class:`vhms.LocalClient` in process,
    :class:`query_dsl.ShardedSource` over the shards; or any :class:`DataSource`), with the
    dashboard page at ``/`` (see :mod:`query_dsl.http.web`) listing the saved dashboards of
    ``dashboards_dir``. ``extra_metrics`` (prometheus_client collectors) add to ``GET
    /metrics`` what else runs in this process: ``artimon up``'s alerts, its Spark history
    job, its ZooKeeper. ``budget`` is the memory all queries share (default:
    :class:`query_dsl.MemoryBudget`'s); each query's is ``limits.max_bytes``."""
    directory = DashboardDirectory(dashboards_dir) if dashboards_dir is not None else None
    pool = budget or MemoryBudget()
    placement = Placement(inline=isinstance(source, LocalClient))
    metrics = ApiMetrics([*extra_metrics, BudgetMetrics(pool), PlacementMetrics(placement)])
    app = QueryApi(
        ApiContext(source, limits, token, metrics, directory, pool, placement),
        title="Artimon query API",
        version="1",
        description="Map/reduce queries over Artimon's series. See docs/dsl.md.",
        responses={400: {"model": ErrorAnswer}, 401: {"model": ErrorAnswer}, 413: {"model": ErrorAnswer}},
        lifespan=_serving,
    )
    app.exception_handler(StarletteHTTPException)(_http_error)  # FastAPI's own, routing's 404 and 405 too
    app.exception_handler(RequestValidationError)(_invalid_request)
    app.include_router(query_router)
    # Prometheus's API under /prometheus (query_dsl.http.prom_api): Grafana's data source, promtool;
    # QueryApi answers its routes before FastAPI (prom_fast), which documents them and answers a 401
    app.include_router(prometheus_router, dependencies=[Depends(authorize)])
    app.include_router(web_router)
    app.add_middleware(BodyLimitMiddleware)  # every route FastAPI serves, the dashboard's too
    return app


def to_csv(result: Matrix | float) -> str:
    """A result as CSV: a row per series and instant (or one scalar)."""
    out = io.StringIO()
    writer = csv.writer(out)
    if not isinstance(result, Matrix):
        writer.writerow(["scalar"])
        writer.writerow([result])
        return out.getvalue()
    label_names = sorted({k for labels in result.labels for k in labels})
    writer.writerow(["name", *label_names, "timestamp_ms", "value"])
    for name, labels, row in zip(result.names, result.labels, result.values, strict=True):
        for ts, value in zip(result.timestamps.tolist(), row.tolist(), strict=True):
            writer.writerow(
                [name, *(labels.get(k, "") for k in label_names), ts, "" if value != value else value]
            )
    return out.getvalue()
