"""The one error shape of every HTTP answer: ``{"error": {"kind", "message", "line", "column"}}``
(line and column for a syntax error only); and the status of a query's error
(:func:`limit_response`)."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from query_dsl.exceptions import QueryBusyError, QueryLimitError, QuerySyntaxError

__all__ = ["error_response", "limit_response"]


def error_response(status: int, exc: Exception) -> JSONResponse:
    detail: dict[str, Any] = {"kind": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, QuerySyntaxError):
        detail.update(line=exc.line, column=exc.column)
    return JSONResponse({"error": detail}, status_code=status)


def limit_response(exc: Exception) -> JSONResponse:
    """A DSL query's error: 503 with ``Retry-After`` when the process's memory budget stayed
    spent, 413 for a limit of the query, else 400 (the query is wrong)."""
    if isinstance(exc, QueryBusyError):
        answer = error_response(503, exc)
        answer.headers["Retry-After"] = str(exc.retry_after_s)
        return answer
    return error_response(413 if isinstance(exc, QueryLimitError) else 400, exc)
