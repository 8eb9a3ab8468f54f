"""Where the engine's queries run: anything with ``query(text, start_ms, end_ms)``.

:class:`query_dsl.Client` is one already (through the HTTP query API);
:class:`EvaluatorSource` runs queries in this process over a ``DataSource`` (``vhms.LocalClient``, or
the VHMS shards found in ZooKeeper); :class:`PromQLSource` runs PromQL instant queries
(a Prometheus rule file's) the same way, and :class:`PromQLHttpSource` sends them to
Prometheus's HTTP API (Artimon's under ``/prometheus``, or a Prometheus server's).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import httpx
import numpy as np

from query_dsl.evaluator import Evaluator, Limits
from query_dsl.exceptions import QueryError, QueryTypeError
from query_dsl.matrix import Matrix
from query_dsl.promql import instant_query
from query_dsl.promql.values import Scalar
from query_dsl.sources import DataSource

__all__ = ["EvaluatorSource", "PromQLHttpSource", "PromQLSource", "QuerySource"]


class QuerySource(Protocol):
    def query(self, query: str, start_ms: int | None = None, end_ms: int | None = None) -> Matrix | float:
        """The query's value with ``end_ms`` as "now" (``None``: the wall clock) and
        ``start_ms`` as the default range start (``None``: an hour before the end)."""
        ...


class EvaluatorSource:
    """Queries evaluated in this process over ``source``, within ``limits``."""

    def __init__(self, source: DataSource, limits: Limits | None = None) -> None:
        self.source = source
        self.limits = limits

    def query(self, query: str, start_ms: int | None = None, end_ms: int | None = None) -> Matrix | float:
        evaluator = Evaluator(
            self.source, now_ms=end_ms, start_ms=start_ms, end_ms=end_ms, limits=self.limits
        )
        return evaluator.evaluate(query)


class PromQLSource:
    """PromQL instant queries at ``end_ms`` (``None``: the wall clock) over ``source``, as a
    Prometheus server evaluates its rules: the answer's instant vector as a one-column
    matrix, a scalar as a number; a string is a ``QueryTypeError``."""

    def __init__(self, source: DataSource, limits: Limits | None = None) -> None:
        self.source = source
        self.limits = limits

    def query(self, query: str, start_ms: int | None = None, end_ms: int | None = None) -> Matrix | float:
        at_s = time.time() if end_ms is None else end_ms / 1000
        value = instant_query(self.source, query, at_s, limits=self.limits).value
        if isinstance(value, Scalar):
            return float(value.values[-1])
        if isinstance(value, Matrix):
            return value
        raise QueryTypeError(f"the PromQL query {query!r} gives a string, not a vector or a scalar")


class PromQLHttpSource:
    """PromQL instant queries at ``end_ms`` through Prometheus's ``POST /api/v1/query`` under
    ``url`` (``http://host:8080/prometheus``), with ``token`` as a bearer token: the answer's
    vector as a one-column matrix, a scalar as a number. An unreachable API, an answer that
    is not Prometheus's envelope and an error answer are ``QueryError``s saying which."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def _data(self, query: str, at_s: float) -> Any:
        try:
            response = self._http.post("/api/v1/query", data={"query": query, "time": f"{at_s:.3f}"})
            body = response.json()
        except httpx.TransportError as exc:
            raise QueryError(
                f"the Prometheus API at {self.url} does not answer: {exc or type(exc).__name__}"
            ) from None
        except ValueError:
            raise QueryError(f"{self.url}/api/v1/query answered {response.status_code}, not JSON") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body if isinstance(body, dict) else {}
            kind, message = error.get("errorType", "error"), error.get("error", response.text[:200])
            raise QueryError(f"{response.status_code} {kind}: {message}")
        return body["data"]

    def query(self, query: str, start_ms: int | None = None, end_ms: int | None = None) -> Matrix | float:
        at_s = time.time() if end_ms is None else end_ms / 1000
        data = self._data(query, at_s)
        if data.get("resultType") == "scalar":
            return float(data["result"][1])
        if data.get("resultType") != "vector":
            raise QueryTypeError(
                f"the PromQL query {query!r} gives a {data.get('resultType')}, not a vector or a scalar"
            )
        names, labels, values = [], [], []
        for sample in data["result"]:
            metric = dict(sample["metric"])
            names.append(metric.pop("__name__", ""))
            labels.append(metric)
            values.append(float(sample["value"][1]))
        at_ms = round(at_s * 1000)
        return Matrix(names, labels, np.array([at_ms], dtype=np.int64), np.array(values).reshape(-1, 1), 1)
