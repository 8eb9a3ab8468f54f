"""How Prometheus's HTTP API reads its parameters (:mod:`query_dsl.http.prom_api`): the query
string then a POSTed form, times as epoch seconds or RFC 3339, durations as seconds or
``5m``, a ``timeout`` that narrows the query's; the parameters as OpenAPI documents them;
and the error each failure answers (:class:`ApiError`: Prometheus's ``errorType`` and code).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import datetime
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, unquote_to_bytes

from fastapi import Request

from bookkeeper.ground import parse_duration
from query_dsl.evaluator import MAX_TIME_MS, Limits
from query_dsl.exceptions import PromQLSyntaxError, QueryBusyError, QueryLimitError
from query_dsl.parser import MAX_QUERY_LENGTH
from vhms import LimitExceededError

__all__ = [
    "FORM",
    "QUERY_PARAMS",
    "RANGE_PARAMS",
    "SERIES_PARAMS",
    "ApiError",
    "classify",
    "duration_param",
    "first",
    "form_params",
    "limits_param",
    "query_params",
    "query_text",
    "read_params",
    "time_param",
]

_MAX_TIME = MAX_TIME_MS / 1000  # the engine's bound: about the year 287,000, exact in float64 ms
_FLOAT = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\Z")


class ApiError(ValueError):
    """A request Prometheus's API would refuse: ``kind`` is its errorType, ``status`` the code."""

    def __init__(self, kind: str, message: str, status: int, retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after_s = retry_after_s


def time_param(value: str | None, default: float, name: str) -> float:
    """Epoch seconds or RFC 3339, as Prometheus reads a time parameter."""
    if value is None or value == "":
        return default
    return _read(_time_seconds(value), value, name, "timestamp")


def _read(seconds: float | None, value: str, name: str, what: str) -> float:
    """A parameter's reading, or Prometheus's answer to one it cannot read."""
    if seconds is None:
        raise ApiError(
            "bad_data", f'invalid parameter "{name}": cannot parse "{value[:100]}" to a valid {what}', 400
        )
    return seconds


# a request's times and step are read twice (its placement's key, then its handler), and a
# dashboard's step again and again: each text's reading is kept (a few hundred, short texts)
@lru_cache(maxsize=256)
def _time_seconds(value: str) -> float | None:
    """:func:`time_param`'s reading of ``value`` (not empty), None where it reads none."""
    if _FLOAT.match(value):
        seconds = float(value)
        return seconds if -_MAX_TIME <= seconds <= _MAX_TIME else None
    try:
        return _bounded(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
    except (ValueError, OverflowError, OSError):
        return None


def _bounded(seconds: float) -> float:
    if not -_MAX_TIME <= seconds <= _MAX_TIME:
        raise ValueError(f"{seconds} is beyond the engine's times")
    return seconds


def duration_param(value: str, name: str) -> float:
    """Seconds, or a duration like ``5m``, as Prometheus reads ``step`` and ``timeout``."""
    return _read(_duration_seconds(value), value, name, "duration")


@lru_cache(maxsize=256)
def _duration_seconds(value: str) -> float | None:
    """:func:`duration_param`'s reading of ``value``, None where it reads none."""
    if _FLOAT.match(value):
        seconds = float(value)
        return seconds if math.isfinite(seconds) and abs(seconds) < 2**62 / 1e9 else None
    try:
        return parse_duration(value) / 1000
    except ValueError:
        return None


FORM = "application/x-www-form-urlencoded"


async def read_params(request: Request) -> list[tuple[str, str]]:
    """The query string's parameters, then a POSTed form's."""
    pairs = list(request.query_params.multi_items())
    if request.method == "POST" and request.headers.get("content-type", "").startswith(FORM):
        pairs += form_params(await request.body())
    return pairs


def query_params(query_string: bytes) -> list[tuple[str, str]]:
    """A request's query string as (name, value) pairs, as Starlette reads it
    (``parse_qsl`` of its Latin-1 text, blank values kept). An ASCII one (what a client
    sends: anything else is percent-encoded) is read here in half the time: only a part
    with a ``%`` or a ``+`` is unquoted, as ``parse_qsl`` unquotes every part."""
    if not query_string.isascii():
        return parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    pairs = []
    for part in query_string.decode("ascii").split("&"):
        if part:
            name, _, value = part.partition("=")
            pairs.append((_unquoted(name), _unquoted(value)))
    return pairs


def _unquoted(text: str) -> str:
    """``urllib.parse.unquote_plus`` of ASCII ``text``."""
    if "%" not in text and "+" not in text:
        return text
    return unquote_to_bytes(text.replace("+", " ")).decode("utf-8", "replace")


def form_params(body: bytes) -> list[tuple[str, str]]:
    """A URL-encoded form body's (name, value) pairs."""
    try:
        return parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise ApiError("bad_data", "the form body is not URL-encoded UTF-8", 400) from None


def first(pairs: list[tuple[str, str]], name: str) -> str | None:
    for key, value in pairs:
        if key == name:
            return value
    return None


def query_text(pairs: list[tuple[str, str]]) -> str:
    text = first(pairs, "query")
    if text is None or not text.strip():
        raise ApiError("bad_data", 'invalid parameter "query": no query given', 400)
    if len(text) > MAX_QUERY_LENGTH:
        raise ApiError("bad_data", f'invalid parameter "query": at most {MAX_QUERY_LENGTH} characters', 400)
    return text


def limits_param(base: Limits, pairs: list[tuple[str, str]]) -> Limits:
    timeout = first(pairs, "timeout")
    if timeout is None:
        return base
    seconds = duration_param(timeout, "timeout")
    if seconds <= 0:
        raise ApiError("bad_data", 'invalid parameter "timeout": must be positive', 400)
    return replace(base, timeout_s=min(seconds, base.timeout_s))


def classify(exc: Exception) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, PromQLSyntaxError):
        return ApiError("bad_data", str(exc), 400)
    if isinstance(exc, QueryBusyError):
        return ApiError("unavailable", str(exc), 503, exc.retry_after_s)
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


def _param(name: str, required: bool, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """One query parameter as OpenAPI documents it (a string unless ``schema`` says otherwise)."""
    return {"name": name, "in": "query", "required": required, "schema": schema or {"type": "string"}}


def _query() -> dict[str, Any]:
    return _param("query", True, {"type": "string", "maxLength": MAX_QUERY_LENGTH})


QUERY_PARAMS = [_query(), _param("time", False), _param("timeout", False)]
RANGE_PARAMS = [
    _query(),
    _param("start", True),
    _param("end", True),
    _param("step", True),
    _param("timeout", False),
]
_MATCH = {"type": "array", "items": {"type": "string", "maxLength": MAX_QUERY_LENGTH}}
SERIES_PARAMS = [_param("match[]", True, _MATCH), _param("start", False), _param("end", False)]
