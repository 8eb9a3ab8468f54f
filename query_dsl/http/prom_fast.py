"""Prometheus's API routes (``prom_api.ROUTES``: query, query_range, series, labels...) served
in pure ASGI, in front of FastAPI: a dashboard fires many small queries, and FastAPI's
middleware (its error page, its telemetry hooks, its body limits), its routing, its
dependencies, its request object and its response cost a small query more CPU than its
evaluation (docs/promql.md, "Small queries, one at a time").

:class:`PrometheusFastPath` is the query API's outermost layer (``QueryApi.__call__``), so it
does what the layers it skips did for these routes: the request body limit of
:mod:`query_dsl.http.body_limit` (a form body over ``MAX_BODY_BYTES`` is refused with its 413
before it is read), and an unexpected error leaves the request to uvicorn, which logs it and
answers 500 ``Internal Server Error`` as Starlette's error middleware did. It answers what
FastAPI's route would: the same parameters (the query string, then a URL-encoded form body of
a POST), the same handler, the same answer and error bodies
(:func:`query_dsl.http.prom_api.respond`), written as two ASGI messages; a wide answer (past
``prom_api.STREAM_BYTES``: a million series' is 86 MB) as its blocks, each written in the
thread pool while the one before is sent, with its Content-Length known before any is written
(:class:`query_dsl.text_rows.RowsText`), so that it never exists whole and its first bytes leave
while the rest is written; a client that goes away stops the writing. A request it does not
serve goes on to FastAPI unchanged: another path or method, and a missing or wrong bearer
token (FastAPI's dependency answers the 401). FastAPI keeps the routes for the OpenAPI
document.

A ``GET`` that the API's placement runs on the event loop (its cost known small) is answered
before even that, by :meth:`PrometheusFastPath.answer_now` as its last byte arrives
(:mod:`bookkeeper.ground.immediate`: no ASGI scope, cycle, task or messages), with the same
bytes and headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Generator, Iterator

from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from bookkeeper.ground import Immediate
from query_dsl.http.body_limit import MAX_BODY_BYTES, declared_length, refuse
from query_dsl.http.context import ApiContext
from query_dsl.http.prom_api import (
    BASE_PATH,
    ROUTES,
    Answer,
    Handler,
    blocks,
    error_answer,
    respond,
    respond_now,
)
from query_dsl.http.prom_params import FORM, ApiError, form_params, query_params
from query_dsl.text_rows import RowsText

__all__ = ["PrometheusFastPath"]

_FORM = FORM.encode()
_JSON = (b"content-type", b"application/json")


def _route_path(scope: Scope) -> str:
    """The path the app routes on: without the ``root_path`` it is mounted under (Starlette's
    rule)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] == "/":
        return path[len(root) :]
    return path


def _header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower case), as Starlette's ``Headers.get``."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def _authorized(scope: Scope, token: str | None) -> bool:
    """``query_dsl.http.context.authorize``'s check."""
    if token is None:
        return True
    given = (_header(scope, b"authorization") or b"").decode("latin-1")
    return secrets.compare_digest(given.encode(), f"Bearer {token}".encode())


class PrometheusFastPath:
    """Serves ``ROUTES`` under ``BASE_PATH`` with ``api``'s context (see the module doc): the
    app asks :meth:`route` what a request is, then has it :meth:`answer` those it serves."""

    def __init__(self, api: ApiContext, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.api = api
        self.max_body_bytes = max_body_bytes
        self.routes = {BASE_PATH + path: (path, handler) for path, handler in ROUTES.items()}

    def route(self, scope: Scope) -> tuple[str, Handler] | None:
        """The route (path under ``BASE_PATH``, handler) of a request this serves, else None."""
        if scope["type"] != "http" or scope["method"] not in ("GET", "POST"):
            return None
        route = self.routes.get(_route_path(scope))
        if route is None or not _authorized(scope, self.api.token):
            return None
        return route

    async def answer(self, route: tuple[str, Handler], scope: Scope, receive: Receive, send: Send) -> None:
        """The answer to a request :meth:`route` found ``route`` for."""
        pairs = query_params(scope["query_string"])
        if scope["method"] == "POST" and (_header(scope, b"content-type") or b"").startswith(_FORM):
            body = await self._form(scope, receive, send)
            if body is None:
                return
            try:
                pairs += form_params(body)
            except ApiError as exc:
                await _send(send, receive, error_answer(exc))
                return
        path, handler = route
        answer = await respond(self.api, path, pairs, handler)
        try:
            await _send(send, receive, answer)
        finally:
            answer.close()

    def answer_now(self, scope: Scope) -> Immediate | None:
        """The answer to a ``GET`` without a body, computed now on the event loop when
        :meth:`route` serves it and the API's placement runs it there (it is known to be
        small), else None (:mod:`bookkeeper.ground.immediate`: it then goes the ASGI way)."""
        route = self.route(scope)
        if route is None:
            return None
        path, handler = route
        answer = respond_now(self.api, path, query_params(scope["query_string"]), handler)
        return None if answer is None else _immediate(answer)

    async def _form(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """The request's body, or None: refused past ``max_body_bytes`` (the 413 sent) or the
        client went away first."""
        declared = declared_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await refuse(scope, receive, send, self.max_body_bytes, declared)
            return None
        chunks = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await refuse(scope, receive, send, self.max_body_bytes, None)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _headers(answer: Answer, size: int) -> list[tuple[bytes, bytes]]:
    headers = [(b"content-length", b"%d" % size), _JSON]
    for name, text in answer.headers.items():
        headers.append((name.lower().encode("latin-1"), text.encode("latin-1")))
    return headers


def _immediate(answer: Answer) -> Immediate:
    body = answer.body.whole() if isinstance(answer.body, RowsText) else answer.body
    return Immediate(answer.status, _headers(answer, len(body)), body, answer.close)


async def _send(send: Send, receive: Receive, answer: Answer) -> None:
    body = answer.body
    headers = _headers(answer, body.size if isinstance(body, RowsText) else len(body))
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    if isinstance(body, RowsText):
        await _stream(send, receive, blocks(body))
    else:
        await send({"type": "http.response.body", "body": body})


async def _stream(send: Send, receive: Receive, pieces: Iterator[memoryview]) -> None:
    """``pieces`` sent one by one, each written in the thread pool while the one before is
    sent (one ahead: with the transport's own limit, at most a few blocks exist at once);
    a client that goes away stops the writing at the next block."""
    gone = asyncio.ensure_future(_disconnect(receive))
    ahead = asyncio.ensure_future(run_in_threadpool(next, pieces, None))
    try:
        while (piece := await ahead) is not None and not gone.done():
            ahead = asyncio.ensure_future(run_in_threadpool(next, pieces, None))
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        if piece is not None:
            return
        await send({"type": "http.response.body", "body": b""})
    finally:
        gone.cancel()
        with contextlib.suppress(BaseException):  # a block still being written: its thread ends it
            await ahead
        if isinstance(pieces, Generator):
            pieces.close()


async def _disconnect(receive: Receive) -> None:
    """Returns when the client has gone away."""
    while (await receive())["type"] != "http.disconnect":
        pass
