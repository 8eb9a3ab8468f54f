"""Prometheus's HTTP API over Artimon's series, mounted under a base path (``/prometheus``)
of the query API, so that Grafana's Prometheus data source and ``promtool`` read Artimon:
``GET|POST /api/v1/query`` (query, time, timeout), ``/api/v1/query_range`` (start, end,
step), ``/api/v1/series`` (match[], start, end), ``/api/v1/labels``,
``/api/v1/label/<name>/values``, ``/api/v1/metadata``, ``/api/v1/status/buildinfo``,
``/api/v1/format_query``. POST takes its parameters as a form body (as Prometheus does).

Answers are ``{"status": "success", "data": ..., "warnings": [...]}``; errors
``{"status": "error", "errorType": ..., "error": ...}`` with Prometheus's codes: 400
``bad_data`` (a parameter or the query does not parse, a range of more than 11,000 points),
422 ``execution`` (the query failed while it ran, a limit was hit: its memory budget's is
Prometheus's ``--query.max-samples`` message), 503 ``timeout``, 503 ``unavailable`` with
``Retry-After`` (the queries running hold the process's memory budget).
Bodies are bounded by the query API's own middleware, queries by its length limit.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from query_dsl.budget import QueryBudget
from query_dsl.evaluator import Limits
from query_dsl.exceptions import QueryError
from query_dsl.http.context import ApiContext, api_context
from query_dsl.http.prom_params import (
    QUERY_PARAMS,
    RANGE_PARAMS,
    SERIES_PARAMS,
    ApiError,
    classify,
    duration_param,
    first,
    limits_param,
    query_text,
    read_params,
    time_param,
)
from query_dsl.parser import MAX_QUERY_LENGTH
from query_dsl.promql import instant_query, parse, range_query
from query_dsl.promql.ast import VectorSelector
from query_dsl.promql.format import format_expr
from query_dsl.promql.selection import fetch_samples
from vhms import VhmsError

__all__ = ["BASE_PATH", "prometheus_router"]

BASE_PATH = "/prometheus"
VERSION = "2.42.0"  # the Prometheus whose API and semantics these answers follow


def _answer(data: Any, warnings: list[str] | None = None) -> Response:
    """The success envelope around ``data``: a value, or a query's ``data`` as JSON text."""
    text = data if isinstance(data, bytes) else orjson.dumps(data)
    tail = b',"warnings":' + orjson.dumps(warnings) if warnings else b""
    return Response(b'{"status":"success","data":' + text + tail + b"}", media_type="application/json")


def _error(error: ApiError) -> Response:
    body = {"status": "error", "errorType": error.kind, "error": str(error)[:2000]}
    headers = {"Retry-After": str(error.retry_after_s)} if error.retry_after_s is not None else None
    return Response(
        orjson.dumps(body), status_code=error.status, media_type="application/json", headers=headers
    )


class PrometheusError(BaseModel):
    """Prometheus's error envelope."""

    status: Literal["error"]
    errorType: str
    error: str


class PrometheusAnswer(BaseModel):
    """Prometheus's success envelope; ``data`` as each endpoint's Prometheus documents it."""

    status: Literal["success"]
    data: Any
    warnings: list[str] | None = None


_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {"model": PrometheusAnswer, "description": "success"},
    400: {"model": PrometheusError, "description": "bad_data: a parameter or the query is wrong"},
    422: {"model": PrometheusError, "description": "execution: the query failed while it ran"},
    503: {"model": PrometheusError, "description": "timeout, or unavailable: the queries' memory is spent"},
}


Handler = Callable[[ApiContext, list[tuple[str, str]], QueryBudget], tuple[Any, list[str]]]
prometheus_router = APIRouter(prefix=BASE_PATH, tags=["prometheus"])


async def _serve(request: Request, handler: Handler) -> Response:
    """``handler``'s answer to the request's parameters, or Prometheus's error."""
    try:
        pairs = await read_params(request)
        api = await api_context(request)

        def run() -> Response:
            budget = api.query_budget()
            try:
                answer = _answer(*handler(api, pairs, budget))
            except BaseException:
                budget.close()
                raise
            answer.background = BackgroundTask(budget.close)  # held until the answer is sent
            return answer

        # evaluated and written off the event loop: a wide answer takes a while
        return await run_in_threadpool(run)
    except (ApiError, QueryError, VhmsError, ValueError) as exc:
        return _error(classify(exc))


def _route(path: str, parameters: list[dict[str, Any]], handler: Handler) -> None:
    """``handler`` at ``path``, for GET and POST (a form body), documented with ``parameters``."""

    async def endpoint(request: Request) -> Response:
        return await _serve(request, handler)

    endpoint.__name__ = "prometheus_" + re.sub(r"\W", "_", path.strip("/"))
    for method in ("GET", "POST"):
        prometheus_router.add_api_route(
            path,
            endpoint,
            methods=[method],
            openapi_extra={"parameters": parameters},
            responses=_ANSWERS,
            name=f"{endpoint.__name__}_{method.lower()}",
        )


def _base_limits(api: ApiContext) -> Limits:
    return api.limits or Limits()


def _ordered(start: float, end: float) -> None:
    if end < start:
        raise ApiError(
            "bad_data", 'invalid parameter "end": end timestamp must not be before start time', 400
        )


def _query(api: ApiContext, pairs: list[tuple[str, str]], budget: QueryBudget) -> tuple[Any, list[str]]:
    text = query_text(pairs)
    at = time_param(first(pairs, "time"), time.time(), "time")
    result = instant_query(api.source, text, at, limits=limits_param(_base_limits(api), pairs), budget=budget)
    budget.need(result.answer_bytes(), "the answer")
    return result.to_prometheus_body(), result.warnings


def _query_range(api: ApiContext, pairs: list[tuple[str, str]], budget: QueryBudget) -> tuple[Any, list[str]]:
    text = query_text(pairs)
    for required in ("start", "end", "step"):
        if first(pairs, required) is None:
            raise ApiError("bad_data", f'invalid parameter "{required}": missing', 400)
    start = time_param(first(pairs, "start"), 0, "start")
    end = time_param(first(pairs, "end"), 0, "end")
    step = duration_param(first(pairs, "step") or "", "step")
    _ordered(start, end)
    if step <= 0:
        raise ApiError(
            "bad_data",
            'invalid parameter "step": zero or negative query resolution step widths are not accepted. '
            "Try a positive integer",
            400,
        )
    if (end - start) / step > 11_000:
        raise ApiError(
            "bad_data",
            "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query "
            "resolution (?step=XX)",
            400,
        )
    limits = limits_param(_base_limits(api), pairs)
    result = range_query(api.source, text, start, end, step, limits=limits, budget=budget)
    budget.need(result.answer_bytes(), "the answer")
    return result.to_prometheus_body(), result.warnings


def _selectors(pairs: list[tuple[str, str]], required: bool) -> list[VectorSelector]:
    texts = [value for key, value in pairs if key == "match[]"]
    if required and not texts:
        raise ApiError("bad_data", "no match[] parameter provided", 400)
    found = []
    for text in texts:
        if len(text) > MAX_QUERY_LENGTH:
            raise ApiError(
                "bad_data", f'invalid parameter "match[]": at most {MAX_QUERY_LENGTH} characters', 400
            )
        expr = parse(text)
        if not isinstance(expr, VectorSelector):
            raise ApiError(
                "bad_data", f'invalid parameter "match[]": {text[:100]!r} is not a series selector', 400
            )
        found.append(expr)
    return found


def _series_of(api: ApiContext, pairs: list[tuple[str, str]], required: bool) -> list[dict[str, str]]:
    now = time.time()
    start = time_param(first(pairs, "start"), now - 3600, "start")
    end = time_param(first(pairs, "end"), now, "end")
    _ordered(start, end)
    out: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for selector in _selectors(pairs, required):
        samples = fetch_samples(api.source, selector, int(start * 1000), int(end * 1000))
        present = ~np.isnan(samples.values).all(axis=1)
        table = samples.table
        for row, (name, labels) in enumerate(zip(table.name_list(), table.label_dicts(), strict=True)):
            if present[row]:
                full = {"__name__": name, **labels}
                out[tuple(sorted(full.items()))] = full
    return [out[key] for key in sorted(out)]


def _series(api: ApiContext, pairs: list[tuple[str, str]], _: QueryBudget) -> tuple[Any, list[str]]:
    return _series_of(api, pairs, required=True), []


def _labels(api: ApiContext, pairs: list[tuple[str, str]], _: QueryBudget) -> tuple[Any, list[str]]:
    if any(key == "match[]" for key, _ in pairs):
        names = {label for found in _series_of(api, pairs, required=False) for label in found}
        return sorted(names), []
    return sorted({"__name__", *api.source.label_names()}), []


def _label_values(api: ApiContext, name: str, pairs: list[tuple[str, str]]) -> tuple[Any, list[str]]:
    if any(key == "match[]" for key, _ in pairs):
        values = {found[name] for found in _series_of(api, pairs, required=False) if name in found}
        return sorted(values), []
    return sorted(api.source.label_values(name)), []


def _metadata(api: ApiContext, pairs: list[tuple[str, str]], _: QueryBudget) -> tuple[Any, list[str]]:
    return {}, []


def _buildinfo(api: ApiContext, pairs: list[tuple[str, str]], _: QueryBudget) -> tuple[Any, list[str]]:
    return {
        "version": VERSION,
        "revision": "artimon",
        "branch": "artimon",
        "buildUser": "artimon",
        "buildDate": "",
        "goVersion": "n/a (Artimon, Python)",
    }, []


def _format_query(api: ApiContext, pairs: list[tuple[str, str]], _: QueryBudget) -> tuple[Any, list[str]]:
    return format_expr(parse(query_text(pairs))), []


_route("/api/v1/query", QUERY_PARAMS, _query)
_route("/api/v1/query_range", RANGE_PARAMS, _query_range)
_route("/api/v1/series", SERIES_PARAMS, _series)
_route("/api/v1/labels", SERIES_PARAMS[1:], _labels)
_route("/api/v1/metadata", [], _metadata)
_route("/api/v1/status/buildinfo", [], _buildinfo)
_route("/api/v1/format_query", QUERY_PARAMS[:1], _format_query)


@prometheus_router.get(
    "/api/v1/label/{name}/values",
    openapi_extra={"parameters": SERIES_PARAMS[1:]},
    responses=_ANSWERS,
    name="prometheus_label_values",
)
async def values_endpoint(name: str, request: Request) -> Response:
    return await _serve(request, lambda api, pairs, _: _label_values(api, name, pairs))
