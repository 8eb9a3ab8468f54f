"""Answering a request on the event loop as its last byte arrives, without the ASGI round.

A small query of Prometheus's API costs the query API about as much CPU as uvicorn's
per-request ASGI machinery around it: the scope, a request cycle, an event, a task, two
messages and their checks (docs/promql.md, "Small queries, one at a time": the range query
``1`` 135-170 µs of server CPU a request that way, 105-110 µs answered here). An app served
by :class:`bookkeeper.ground.BackgroundServer` that has an :class:`AnswersNow` method
``answer_now(scope)`` is asked for an :class:`Immediate` answer when a request

- is a ``GET`` whose message ends without a body (a body, if one comes, sends it the ASGI
  way: the app reads it there),
- on a connection with no other request in flight or queued (pipelined requests keep their
  order), whose writes are not paused (a client that does not read gets no more bytes
  queued), no ``Expect: 100-continue``, no upgrade, and the server under its
  ``limit_concurrency``;

``scope`` then holds what routing needs: ``type``, ``method``, ``path``, ``raw_path``,
``root_path``, ``query_string``, ``headers``, ``http_version``, as uvicorn fills them. The
app answers, on the event loop's thread, or returns None and the request goes the ASGI way
as any other. The answer is written as uvicorn writes one (its status line and default
headers, ``connection: close`` where the connection does not stay open), and the connection
goes on as after an ASGI answer (keep-alive timer, pipelined requests). An exception in
``answer_now`` is logged, answered 500 and the connection closed, as uvicorn does for an
ASGI app's.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

__all__ = ["AnswersNow", "Immediate", "ImmediateProtocol"]


@dataclass
class Immediate:
    """An answer written at once: its status, its headers (``content-type`` and
    ``content-length`` among them; lower-case names), its body, and what to call once it is
    written (``done``: the answer's resources given back)."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes | memoryview
    done: Callable[[], None] | None = None


class AnswersNow(Protocol):
    """An ASGI app that may answer a request at once (see the module doc)."""

    def answer_now(self, scope: Mapping[str, Any]) -> Immediate | None: ...


_FAILED = Immediate(
    500,
    [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"21")],
    b"Internal Server Error",
)


class ImmediateProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol asking an :class:`AnswersNow` app first (the module doc)."""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._answers_now: Callable[[Mapping[str, Any]], Immediate | None] | None = getattr(
            self.app, "answer_now", None
        )
        self._deferred = False  # the request's ASGI cycle not made: asked at the message's end

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._deferred = False

    def on_headers_complete(self) -> None:
        if self._answers_now is not None and self._may_answer_now():
            try:
                parsed = httptools.parse_url(self.url)
            except httptools.HttpParserInvalidURLError:
                super().on_headers_complete()  # refused as uvicorn refuses it
                return
            path = parsed.path.decode("ascii")
            if "%" in path:
                path = urllib.parse.unquote(path)
            scope = self.scope
            scope["method"] = "GET"
            scope["path"] = self.root_path + path
            scope["raw_path"] = self.root_path.encode("ascii") + parsed.path
            scope["query_string"] = parsed.query or b""
            if self.parser.get_http_version() == "1.0":
                scope["http_version"] = "1.0"
            self._deferred = True
            return
        super().on_headers_complete()

    def _may_answer_now(self) -> bool:
        """Whether the request whose headers just ended may be answered at once."""
        limit = self.limit_concurrency
        return (
            self.parser.get_method() == b"GET"
            and (self.cycle is None or self.cycle.response_complete)
            and not self.pipeline
            and not self.flow.write_paused
            and not self.expect_100_continue
            and not self.parser.should_upgrade()
            and (limit is None or (len(self.connections) < limit and len(self.tasks) < limit))
        )

    def on_body(self, body: bytes) -> None:
        if self._deferred:  # a GET with a body: the ASGI way, where the app reads it
            self._deferred = False
            super().on_headers_complete()
        super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._deferred:
            super().on_message_complete()
            return
        self._deferred = False
        assert self._answers_now is not None  # deferred only for an app that answers now
        try:
            answer = self._answers_now(self.scope)
        except Exception:
            self.logger.exception("Exception answering %s at once", self.scope["path"])
            self._write(_FAILED, keep_alive=False)
            return
        if answer is None:
            super().on_headers_complete()
            super().on_message_complete()
            return
        try:
            self._write(answer, self.parser.should_keep_alive() and self.scope["http_version"] != "1.0")
        finally:
            if answer.done is not None:
                answer.done()

    def _write(self, answer: Immediate, keep_alive: bool) -> None:
        """``answer`` as uvicorn writes an ASGI answer, then the connection's next step."""
        head = [STATUS_LINE[answer.status]]  # the status lines uvicorn writes
        for name, value in (*self.server_state.default_headers, *answer.headers):
            head += (name, b": ", value, b"\r\n")
        if not keep_alive:
            head.append(b"connection: close\r\n")
        head.append(b"\r\n")
        self.transport.writelines((b"".join(head), answer.body))
        if not keep_alive:
            self.transport.close()
        self.on_response_complete()
