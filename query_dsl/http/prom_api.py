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
A wide answer (past ``STREAM_BYTES``) is sent a block at a time as it is written, its
Content-Length known first (:func:`blocks`; FastAPI's routes as a ``StreamingResponse``).
Bodies are bounded by the query API's own middleware, queries by its length limit. The query
API serves the routes of ``ROUTES`` through :mod:`query_dsl.http.prom_fast` (pure ASGI), each
request on the event loop or in the thread pool as :mod:`query_dsl.http.placement` places it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel
from starlette.background import BackgroundTask

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
from query_dsl.text_rows import RowsText
from vhms import VhmsError

__all__ = [
    "BASE_PATH",
    "ROUTES",
    "STREAM_BYTES",
    "Answer",
    "Handler",
    "blocks",
    "error_answer",
    "prometheus_router",
    "request_key",
    "respond",
    "respond_now",
]

BASE_PATH = "/prometheus"
VERSION = "2.42.0"  # the Prometheus whose API and semantics these answers follow


STREAM_BYTES = 4 << 20  # an answer's JSON beyond this is sent a block of about this size at a time
_HEAD = b'{"status":"success","data":'


def _envelope(data: Any, warnings: list[str]) -> bytes | memoryview | RowsText:
    """The success envelope around ``data``: a value, a query's ``data`` as JSON text, or a
    wide one laid out (written in one buffer with the envelope, or, past ``STREAM_BYTES``, left
    laid out, to be sent a block at a time as it is written: an answer of a million series is
    86 MB)."""
    tail = b',"warnings":' + orjson.dumps(warnings) + b"}" if warnings else b"}"
    if isinstance(data, RowsText):
        text = data.wrapped(_HEAD, tail)
        return text if text.size > STREAM_BYTES else text.whole()
    return b"".join((_HEAD, data if isinstance(data, bytes | memoryview) else orjson.dumps(data), tail))


@dataclass
class Answer:
    """An answer of Prometheus's API: its code, its JSON text (a wide one laid out, written as
    it is sent: :func:`blocks`) and its extra headers; the query's ``budget`` is held until the
    answer is sent (:meth:`close`)."""

    status: int
    body: bytes | memoryview | RowsText
    headers: dict[str, str] = field(default_factory=dict)
    budget: QueryBudget | None = None

    def close(self) -> None:
        if self.budget is not None:
            self.budget.close()


def blocks(body: RowsText) -> Iterator[memoryview]:
    """A laid-out answer's blocks, each written when it is asked for (``STREAM_BYTES`` each)."""
    return body.blocks(STREAM_BYTES)


def error_answer(error: ApiError) -> Answer:
    body = {"status": "error", "errorType": error.kind, "error": str(error)[:2000]}
    headers = {"Retry-After": str(error.retry_after_s)} if error.retry_after_s is not None else {}
    return Answer(error.status, orjson.dumps(body), headers)


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
ROUTES: dict[str, Handler] = {}  # path (under BASE_PATH) -> handler, for GET and POST


def request_key(route: str, pairs: list[tuple[str, str]]) -> Hashable:
    """What a request's cost depends on (:mod:`query_dsl.http.placement`): its route, its
    query or selectors (hashed: a query is up to 10,000 characters), and its number of
    evaluation steps (a range query's) or the seconds it spans (a series lookup's); not where
    in time it lies, which a dashboard's refresh moves."""
    texts = hash(tuple(value for name, value in pairs if name in ("query", "match[]")))
    try:
        span = time_param(first(pairs, "end"), 0, "end") - time_param(first(pairs, "start"), 0, "start")
        step = duration_param(first(pairs, "step") or "1", "step")
    except ApiError:
        return (route, texts, None)
    return (route, texts, round(span / step) if step > 0 else None)


def _work(
    handler: Handler, pairs: list[tuple[str, str]]
) -> Callable[[ApiContext, QueryBudget], bytes | memoryview | RowsText]:
    return lambda context, spend: _envelope(*handler(context, pairs, spend))


_REFUSALS = (ApiError, QueryError, VhmsError, ValueError)  # answered as Prometheus's errors


async def respond(api: ApiContext, route: str, pairs: list[tuple[str, str]], handler: Handler) -> Answer:
    """``handler``'s answer to ``pairs``, or Prometheus's error; run on the event loop or in
    the thread pool as ``api.placement`` places it (a wide answer takes a while)."""
    try:
        body, budget = await api.placement.run(api, request_key(route, pairs), _work(handler, pairs))
    except _REFUSALS as exc:
        return error_answer(classify(exc))
    return Answer(200, body, budget=budget)


def respond_now(api: ApiContext, route: str, pairs: list[tuple[str, str]], handler: Handler) -> Answer | None:
    """:func:`respond`'s answer when ``api.placement`` runs it on the event loop (it is
    known to be small), computed now on the caller's thread; else None."""
    try:
        done = api.placement.run_now(api, request_key(route, pairs), _work(handler, pairs))
    except _REFUSALS as exc:
        return error_answer(classify(exc))
    return None if done is None else Answer(200, done[0], budget=done[1])


def _response(answer: Answer) -> Response:
    background = BackgroundTask(answer.close)  # the budget held until the answer is sent
    if not isinstance(answer.body, RowsText):
        response = Response(answer.body, answer.status, answer.headers, "application/json")
        response.background = background
        return response
    headers = {**answer.headers, "Content-Length": str(answer.body.size)}  # known before it is written
    return StreamingResponse(blocks(answer.body), answer.status, headers, "application/json", background)


async def _serve(request: Request, route: str, handler: Handler) -> Response:
    """``handler``'s answer to the request's parameters, or Prometheus's error."""
    try:
        pairs = await read_params(request)
    except ApiError as exc:
        return _response(error_answer(exc))
    return _response(await respond(await api_context(request), route, pairs, handler))


def _route(path: str, parameters: list[dict[str, Any]], handler: Handler) -> None:
    """``handler`` at ``path``, for GET and POST (a form body), documented with ``parameters``;
    the query API serves it through :mod:`query_dsl.http.prom_fast` (``ROUTES``), FastAPI's
    routing where this router is included without it."""

    async def endpoint(request: Request) -> Response:
        return await _serve(request, path, handler)

    ROUTES[path] = handler
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
    return result.prometheus_text(), result.warnings


def _query_range(api: ApiContext, pairs: list[tuple[str, str]], budget: QueryBudget) -> tuple[Any, list[str]]:
    text = query_text(pairs)
    given = {name: first(pairs, name) for name in ("start", "end", "step")}
    for required, value in given.items():
        if value is None:
            raise ApiError("bad_data", f'invalid parameter "{required}": missing', 400)
    start = time_param(given["start"], 0, "start")
    end = time_param(given["end"], 0, "end")
    step = duration_param(given["step"] or "", "step")
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
    return result.prometheus_text(), result.warnings


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
    route = f"/api/v1/label/{name}/values"
    return await _serve(request, route, lambda api, pairs, _: _label_values(api, name, pairs))
