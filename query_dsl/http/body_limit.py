"""An ASGI middleware that refuses a request body over ``max_bytes`` with 413, before the
app reads it whole: at once from a declared ``Content-Length``, or as soon as a body sent
without one (chunked) passes the limit while the app reads it. Without it a 300 MB JSON
body was read and parsed before the query's own 10,000-character check (the server's RSS
went from 217 MB to 1.29 GB).

The answer is the API's error shape (``{"error": {"kind": "HTTPException", "message"}}``)
with ``Connection: close``, so the server stops reading the rest of the body instead of
draining it. Starlette's ``RequestBodyLimitMiddleware`` answers plain text and keeps the
connection, hence this one. The query API's fast path for Prometheus's routes, which runs in
front of this middleware (:mod:`query_dsl.http.prom_fast`), refuses with :func:`refuse` too.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MAX_BODY_BYTES", "BodyLimitMiddleware", "declared_length", "refuse"]

# a query of 10,000 characters, every one a JSON escape of an astral character
# ("\ud83d\ude00", 12 bytes), with the rest of the request: 121,000 bytes at most
MAX_BODY_BYTES = 128 * 1024


def declared_length(scope: Scope) -> int | None:
    """The request's ``Content-Length``, when it declares one."""
    declared = Headers(scope=scope).get("content-length")
    return int(declared) if declared is not None and declared.isdigit() else None


async def refuse(scope: Scope, receive: Receive, send: Send, max_bytes: int, declared: int | None) -> None:
    """The 413 of a request body over ``max_bytes``: ``declared`` so, or (None) found so while
    it was read."""
    what = (
        f"declares {declared:,} bytes"
        if declared is not None
        else f"passed {max_bytes:,} bytes while it was read"
    )
    message = f"the request body {what}: at most {max_bytes:,} bytes are accepted"
    response = JSONResponse(
        {"error": {"kind": "HTTPException", "message": message}},
        status_code=413,
        headers={"connection": "close"},
    )
    await response(scope, receive, send)


class _BodyTooLarge(Exception):
    """Raised into the app by ``receive`` once the body passes the limit."""


class BodyLimitMiddleware:
    """See the module doc; ``max_bytes`` is the largest body accepted."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await refuse(scope, receive, send, self.max_bytes, declared)
            return
        received = 0
        over = False
        started = False

        async def limited_receive() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    over = True
                    raise _BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if over:  # the app's answer to a body it never had whole (a 400, a 500): ours replaces it
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not over or started:
                raise
        if over and not started:
            await refuse(scope, receive, send, self.max_bytes, None)
