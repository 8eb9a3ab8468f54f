"""The one error shape of every HTTP answer: ``{"error": {"kind", "message", "line", "column"}}``
(line and column for a syntax error only)."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from query_dsl.exceptions import QuerySyntaxError

__all__ = ["error_response"]


def error_response(status: int, exc: Exception) -> JSONResponse:
    detail: dict[str, Any] = {"kind": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, QuerySyntaxError):
        detail.update(line=exc.line, column=exc.column)
    return JSONResponse({"error": detail}, status_code=status)
