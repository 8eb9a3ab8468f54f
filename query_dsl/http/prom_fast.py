"""Prometheus's API routes (``prom_api.ROUTES``: query, query_range, series, labels...) served
in pure ASGI, in front of FastAPI's routing: a dashboard fires many small queries, and
FastAPI's routing, its dependencies, its request object and its response cost a small query
more CPU than its evaluation (docs/promql.md, "Small queries, one at a time").

It sits inside the app's middleware (Starlette's 500 answer, the request body limit of
:mod:`query_dsl.http.body_limit`) and answers what FastAPI's route would: the same
parameters (the query string, then a URL-encoded form body of a POST), the same handler, the
same answer and error bodies (:func:`query_dsl.http.prom_api.respond`), written as ASGI
messages. A request it does not serve goes on to FastAPI unchanged: another path or method,
and a missing or wrong bearer token (FastAPI's dependency answers the 401). FastAPI keeps the
routes for the OpenAPI document.
"""

from __future__ import annotations

import secrets

from starlette.types import ASGIApp, Receive, Scope, Send

from query_dsl.http.context import ApiContext
from query_dsl.http.prom_api import BASE_PATH, ROUTES, Answer, error_answer, respond
from query_dsl.http.prom_params import FORM, ApiError, form_params, query_params

__all__ = ["PrometheusFastPath"]

_FORM = FORM.encode()


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


async def _body(receive: Receive) -> bytes | None:
    """The request's body, or None when the client went away first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


class PrometheusFastPath:
    """ASGI middleware serving ``ROUTES`` under ``BASE_PATH`` (see the module doc); the app's
    :class:`~query_dsl.http.context.ApiContext` is read from ``scope["app"].state.api``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.routes = {BASE_PATH + path: (path, handler) for path, handler in ROUTES.items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.routes.get(_route_path(scope)) if scope["type"] == "http" else None
        api: ApiContext | None = scope["app"].state.api if route is not None else None
        if (
            route is None
            or api is None
            or scope["method"] not in ("GET", "POST")
            or not _authorized(scope, api.token)
        ):
            await self.app(scope, receive, send)
            return
        pairs = query_params(scope["query_string"])
        if scope["method"] == "POST" and (_header(scope, b"content-type") or b"").startswith(_FORM):
            body = await _body(receive)
            if body is None:
                return
            try:
                pairs += form_params(body)
            except ApiError as exc:
                await _send(send, error_answer(exc))
                return
        path, handler = route
        answer = await respond(api, path, pairs, handler)
        try:
            await _send(send, answer)
        finally:
            answer.close()


async def _send(send: Send, answer: Answer) -> None:
    headers = [(b"content-length", str(len(answer.body)).encode()), (b"content-type", b"application/json")]
    for name, text in answer.headers.items():
        headers.append((name.lower().encode("latin-1"), text.encode("latin-1")))
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})
