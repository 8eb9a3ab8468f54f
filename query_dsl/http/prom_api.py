"""Prometheus's HTTP API over Artimon's series, mounted under a base path (``/prometheus``)
of the query API, so that Grafana's Prometheus data source and ``promtool`` read Artimon:
``GET|POST /api/v1/query`` (query, time, timeout), ``/api/v1/query_range`` (start, end,
step), ``/api/v1/series`` (match[], start, end), ``/api/v1/labels``,
``/api/v1/label/<name>/values``, ``/api/v1/metadata``, ``/api/v1/status/buildinfo``,
``/api/v1/format_query``. POST takes its parameters as a form body (as Prometheus does).

Answers are ``{"status": "success", "data": ..., "warnings": [...]}``; errors
``{"status": "error", "errorType": ..., "error": ...}`` with Prometheus's codes: 400
``bad_data`` (a parameter or the query does not parse, a range of more than 11,000 points),
422 ``execution`` (the query failed while it ran, a limit was hit), 503 ``timeout``.
Bodies are bounded by the query API's own middleware, queries by its length limit.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal
from urllib.parse import parse_qsl

import numpy as np
import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from query_dsl.evaluator import MAX_TIME_MS, Limits
from query_dsl.exceptions import PromQLSyntaxError, QueryError, QueryLimitError
from query_dsl.parser import MAX_QUERY_LENGTH
from query_dsl.promql import instant_query, parse, range_query
from query_dsl.promql.ast import VectorSelector
from query_dsl.promql.format import format_expr
from query_dsl.promql.parser import parse_duration
from query_dsl.promql.selection import fetch_samples
from query_dsl.sources import DataSource
from vhms import LimitExceededError, VhmsError

__all__ = ["BASE_PATH", "prometheus_router"]

BASE_PATH = "/prometheus"
VERSION = "2.42.0"  # the Prometheus whose API and semantics these answers follow
_MAX_TIME = MAX_TIME_MS / 1000  # the engine's bound: about the year 287,000, exact in float64 ms
_FLOAT = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\Z")


class ApiError(ValueError):
    """A request Prometheus's API would refuse: ``kind`` is its errorType, ``status`` the code."""

    def __init__(self, kind: str, message: str, status: int) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


def _answer(data: Any, warnings: list[str] | None = None) -> Response:
    body: dict[str, Any] = {"status": "success", "data": data}
    if warnings:
        body["warnings"] = warnings
    return Response(orjson.dumps(body), media_type="application/json")


def _error(error: ApiError) -> Response:
    body = {"status": "error", "errorType": error.kind, "error": str(error)[:2000]}
    return Response(orjson.dumps(body), status_code=error.status, media_type="application/json")


def _time(value: str | None, default: float, name: str) -> float:
    """Epoch seconds or RFC 3339, as Prometheus reads a time parameter."""
    if value is None or value == "":
        return default
    if _FLOAT.match(value):
        seconds = float(value)
        if -_MAX_TIME <= seconds <= _MAX_TIME:
            return seconds
    else:
        try:
            return _bounded(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
        except (ValueError, OverflowError, OSError):
            pass
    raise ApiError(
        "bad_data", f'invalid parameter "{name}": cannot parse "{value[:100]}" to a valid timestamp', 400
    )


def _bounded(seconds: float) -> float:
    if not -_MAX_TIME <= seconds <= _MAX_TIME:
        raise ValueError(f"{seconds} is beyond the engine's times")
    return seconds


def _duration(value: str, name: str) -> float:
    """Seconds, or a duration like ``5m``, as Prometheus reads ``step`` and ``timeout``."""
    if _FLOAT.match(value):
        seconds = float(value)
        if math.isfinite(seconds) and abs(seconds) < 2**62 / 1e9:
            return seconds
    else:
        try:
            return parse_duration(value) / 1000
        except ValueError:
            pass
    raise ApiError(
        "bad_data", f'invalid parameter "{name}": cannot parse "{value[:100]}" to a valid duration', 400
    )


async def _params(request: Request) -> list[tuple[str, str]]:
    """The query string's parameters, then a POSTed form's."""
    pairs = list(request.query_params.multi_items())
    if request.method == "POST":
        content_type = request.headers.get("content-type", "")
        if content_type.startswith("application/x-www-form-urlencoded"):
            body = await request.body()
            try:
                pairs += parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
            except (UnicodeDecodeError, ValueError):
                raise ApiError("bad_data", "the form body is not URL-encoded UTF-8", 400) from None
    return pairs


def _one(pairs: list[tuple[str, str]], name: str) -> str | None:
    for key, value in pairs:
        if key == name:
            return value
    return None


def _query_text(pairs: list[tuple[str, str]]) -> str:
    text = _one(pairs, "query")
    if text is None or not text.strip():
        raise ApiError("bad_data", 'invalid parameter "query": no query given', 400)
    if len(text) > MAX_QUERY_LENGTH:
        raise ApiError("bad_data", f'invalid parameter "query": at most {MAX_QUERY_LENGTH} characters', 400)
    return text


def _limits(base: Limits, pairs: list[tuple[str, str]]) -> Limits:
    timeout = _one(pairs, "timeout")
    if timeout is None:
        return base
    seconds = _duration(timeout, "timeout")
    if seconds <= 0:
        raise ApiError("bad_data", 'invalid parameter "timeout": must be positive', 400)
    return Limits(base.max_series, base.max_points, min(seconds, base.timeout_s))


def _classify(exc: Exception) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, PromQLSyntaxError):
        return ApiError("bad_data", str(exc), 400)
    if isinstance(exc, QueryLimitError):
        message = str(exc)
        if "timed out" in message:
            return ApiError("timeout", message, 503)
        if "11,000 points" in message:
            return ApiError("bad_data", message, 400)
        return ApiError("execution", message, 422)
    if isinstance(exc, LimitExceededError):
        return ApiError("execution", str(exc), 422)
    return ApiError("execution", str(exc), 422)


_QUERY_PARAMS = [
    {
        "name": "query",
        "in": "query",
        "required": True,
        "schema": {"type": "string", "maxLength": MAX_QUERY_LENGTH},
    },
    {"name": "time", "in": "query", "required": False, "schema": {"type": "string"}},
    {"name": "timeout", "in": "query", "required": False, "schema": {"type": "string"}},
]
_RANGE_PARAMS = [
    {
        "name": "query",
        "in": "query",
        "required": True,
        "schema": {"type": "string", "maxLength": MAX_QUERY_LENGTH},
    },
    {"name": "start", "in": "query", "required": True, "schema": {"type": "string"}},
    {"name": "end", "in": "query", "required": True, "schema": {"type": "string"}},
    {"name": "step", "in": "query", "required": True, "schema": {"type": "string"}},
    {"name": "timeout", "in": "query", "required": False, "schema": {"type": "string"}},
]
_SERIES_PARAMS = [
    {
        "name": "match[]",
        "in": "query",
        "required": True,
        "schema": {"type": "array", "items": {"type": "string", "maxLength": MAX_QUERY_LENGTH}},
    },
    {"name": "start", "in": "query", "required": False, "schema": {"type": "string"}},
    {"name": "end", "in": "query", "required": False, "schema": {"type": "string"}},
]


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
    503: {"model": PrometheusError, "description": "timeout"},
}


def prometheus_router(source: DataSource, *, limits: Limits | None = None) -> APIRouter:
    """The routes of Prometheus's API over ``source``, to mount under :data:`BASE_PATH`."""
    base_limits = limits or Limits()
    router = APIRouter(prefix=BASE_PATH, tags=["prometheus"])

    def route(
        path: str, parameters: list[dict[str, Any]], handler: Callable[[list[tuple[str, str]]], Any]
    ) -> None:
        async def endpoint(request: Request) -> Response:
            try:
                pairs = await _params(request)
                # evaluated and written off the event loop: a wide answer takes a while
                return await run_in_threadpool(lambda: _answer(*handler(pairs)))
            except (ApiError, QueryError, VhmsError, ValueError) as exc:
                return _error(_classify(exc))

        endpoint.__name__ = "prometheus_" + re.sub(r"\W", "_", path.strip("/"))
        for method in ("GET", "POST"):
            router.add_api_route(
                path,
                endpoint,
                methods=[method],
                openapi_extra={"parameters": parameters},
                responses=_ANSWERS,
                name=f"{endpoint.__name__}_{method.lower()}",
            )

    def query(pairs: list[tuple[str, str]]) -> tuple[Any, list[str]]:
        text = _query_text(pairs)
        at = _time(_one(pairs, "time"), time.time(), "time")
        result = instant_query(source, text, at, limits=_limits(base_limits, pairs))
        return result.to_prometheus_json(), result.warnings

    def query_range(pairs: list[tuple[str, str]]) -> tuple[Any, list[str]]:
        text = _query_text(pairs)
        for required in ("start", "end", "step"):
            if _one(pairs, required) is None:
                raise ApiError("bad_data", f'invalid parameter "{required}": missing', 400)
        start = _time(_one(pairs, "start"), 0, "start")
        end = _time(_one(pairs, "end"), 0, "end")
        step = _duration(_one(pairs, "step") or "", "step")
        if end < start:
            raise ApiError(
                "bad_data", 'invalid parameter "end": end timestamp must not be before start time', 400
            )
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
        result = range_query(source, text, start, end, step, limits=_limits(base_limits, pairs))
        return result.to_prometheus_json(), result.warnings

    def selectors(pairs: list[tuple[str, str]], required: bool) -> list[Any]:
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

    def series_of(pairs: list[tuple[str, str]], required: bool) -> list[dict[str, str]]:
        now = time.time()
        start = _time(_one(pairs, "start"), now - 3600, "start")
        end = _time(_one(pairs, "end"), now, "end")
        if end < start:
            raise ApiError(
                "bad_data", 'invalid parameter "end": end timestamp must not be before start time', 400
            )
        out: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        for selector in selectors(pairs, required):
            samples = fetch_samples(source, selector, int(start * 1000), int(end * 1000))
            present = ~np.isnan(samples.values).all(axis=1)
            table = samples.table
            for row, (name, labels) in enumerate(zip(table.name_list(), table.label_dicts(), strict=True)):
                if present[row]:
                    full = {"__name__": name, **labels}
                    out[tuple(sorted(full.items()))] = full
        return [out[key] for key in sorted(out)]

    def series(pairs: list[tuple[str, str]]) -> tuple[Any, list[str]]:
        return series_of(pairs, required=True), []

    def labels(pairs: list[tuple[str, str]]) -> tuple[Any, list[str]]:
        if any(key == "match[]" for key, _ in pairs):
            names = {label for found in series_of(pairs, required=False) for label in found}
            return sorted(names), []
        return sorted({"__name__", *source.label_names()}), []

    def label_values(name: str, pairs: list[tuple[str, str]]) -> tuple[Any, list[str]]:
        if any(key == "match[]" for key, _ in pairs):
            values = {found[name] for found in series_of(pairs, required=False) if name in found}
            return sorted(values), []
        label = name
        return sorted(source.label_values(label)), []

    def metadata(pairs: list[tuple[str, str]]) -> tuple[Any, list[str]]:
        return {}, []

    def buildinfo(pairs: list[tuple[str, str]]) -> tuple[Any, list[str]]:
        return {
            "version": VERSION,
            "revision": "artimon",
            "branch": "artimon",
            "buildUser": "artimon",
            "buildDate": "",
            "goVersion": "n/a (Artimon, Python)",
        }, []

    def format_query(pairs: list[tuple[str, str]]) -> tuple[Any, list[str]]:
        return format_expr(parse(_query_text(pairs))), []

    route("/api/v1/query", _QUERY_PARAMS, query)
    route("/api/v1/query_range", _RANGE_PARAMS, query_range)
    route("/api/v1/series", _SERIES_PARAMS, series)
    route("/api/v1/labels", _SERIES_PARAMS[1:], labels)
    route("/api/v1/metadata", [], metadata)
    route("/api/v1/status/buildinfo", [], buildinfo)
    route("/api/v1/format_query", _QUERY_PARAMS[:1], format_query)

    async def values_endpoint(name: str, request: Request) -> Response:
        try:
            pairs = await _params(request)
            return await run_in_threadpool(lambda: _answer(*label_values(name, pairs)))
        except (ApiError, QueryError, VhmsError, ValueError) as exc:
            return _error(_classify(exc))

    router.add_api_route(
        "/api/v1/label/{name}/values",
        values_endpoint,
        methods=["GET"],
        openapi_extra={"parameters": _SERIES_PARAMS[1:]},
        responses=_ANSWERS,
        name="prometheus_label_values",
    )
    return router
