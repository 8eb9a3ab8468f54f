"""An app that answers at once (bookkeeper/ground/immediate.py), served by BackgroundServer over
real sockets: a GET without a body answered on the event loop with uvicorn's head, anything
else the ASGI way, pipelined requests in their order, HTTP/1.0 and a failure closing the
connection."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from bookkeeper.ground import BackgroundServer, Immediate


class _App:
    """``/now`` answered at once, ``/boom`` failing there, the rest (and what comes to
    ``__call__``) answered by ASGI with ``asgi:`` and the request's body."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, bytes]] = []  # what answer_now was asked
        self.served: list[tuple[str, str, bytes]] = []  # what the ASGI way answered
        self.done = 0

    def answer_now(self, scope: dict[str, Any]) -> Immediate | None:
        self.asked.append((scope["path"], scope["query_string"]))
        if scope["path"] == "/boom":
            raise RuntimeError("boom")
        if scope["path"] != "/now":
            return None
        body = b"now:" + scope["query_string"]
        headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]
        return Immediate(200, headers, body, self._done)

    def _done(self) -> None:
        self.done += 1

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.served.append((scope["method"], scope["path"], body))
        answer = b"asgi:" + body
        headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(answer))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})


@pytest.fixture
def served() -> Iterator[tuple[_App, int]]:
    app = _App()
    server = BackgroundServer(app, name="test-immediate")
    server.start()
    try:
        yield app, server.port
    finally:
        server.stop()


def _connect(port: int) -> tuple[socket.socket, Any]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock, sock.makefile("rb")


def _answer(stream: Any) -> tuple[str, dict[str, str], bytes]:
    """One answer read off ``stream``: status line, headers (lower-case names), body."""
    status = stream.readline().decode().rstrip("\r\n")
    headers = {}
    while (line := stream.readline().decode().rstrip("\r\n")) != "":
        name, _, value = line.partition(":")
        headers[name.lower()] = value.strip()
    return status, headers, stream.read(int(headers["content-length"]))


def test_a_get_is_answered_at_once_with_uvicorns_head(served: tuple[_App, int]) -> None:
    app, port = served
    sock, stream = _connect(port)
    with sock, stream:
        for query in (b"a=1", b"b=2"):  # the connection stays open between them
            sock.sendall(b"GET /now?" + query + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            status, headers, body = _answer(stream)
            assert status == "HTTP/1.1 200 OK" and body == b"now:" + query
            assert set(headers) == {"date", "content-type", "content-length"}  # no server header
    assert app.asked == [("/now", b"a=1"), ("/now", b"b=2")] and app.served == [] and app.done == 2


def test_what_it_does_not_answer_goes_the_asgi_way(served: tuple[_App, int]) -> None:
    app, port = served
    sock, stream = _connect(port)
    with sock, stream:
        sock.sendall(b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _answer(stream)[2] == b"asgi:"
        sock.sendall(b"GET /now HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")  # a body
        assert _answer(stream)[2] == b"asgi:abc"
        sock.sendall(b"POST /now HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nxy")
        assert _answer(stream)[2] == b"asgi:xy"
    assert app.asked == [("/other", b"")]
    assert app.served == [("GET", "/other", b""), ("GET", "/now", b"abc"), ("POST", "/now", b"xy")]


def test_pipelined_requests_are_answered_in_their_order(served: tuple[_App, int]) -> None:
    app, port = served
    sock, stream = _connect(port)
    with sock, stream:
        sock.sendall(
            b"GET /now?1 HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /now?3 HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        assert [_answer(stream)[2] for _ in range(3)] == [b"now:1", b"asgi:", b"asgi:"]
    # the third came while the second's ASGI answer was in flight: queued behind it, not asked
    assert app.asked == [("/now", b"1"), ("/other", b"")]
    assert app.served == [("GET", "/other", b""), ("GET", "/now", b"")]


def test_http_1_0_closes_the_connection(served: tuple[_App, int]) -> None:
    _, port = served
    sock, stream = _connect(port)
    with sock, stream:
        sock.sendall(b"GET /now?x HTTP/1.0\r\n\r\n")
        status, headers, body = _answer(stream)
        assert (status, headers["connection"], body) == ("HTTP/1.1 200 OK", "close", b"now:x")
        assert stream.read() == b""  # closed by the server


def test_a_failure_answering_is_a_500_and_closes(served: tuple[_App, int]) -> None:
    _, port = served
    sock, stream = _connect(port)
    with sock, stream:
        sock.sendall(b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, body = _answer(stream)
        assert (status, headers["connection"], body) == (
            "HTTP/1.1 500 Internal Server Error",
            "close",
            b"Internal Server Error",
        )
        assert stream.read() == b""
    sock, stream = _connect(port)  # the server goes on
    with sock, stream:
        sock.sendall(b"GET /now HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _answer(stream)[2] == b"now:"


def test_garbage_is_refused_as_uvicorn_refuses_it(served: tuple[_App, int]) -> None:
    app, port = served
    sock, stream = _connect(port)
    with sock, stream:
        sock.sendall(b"GET /now\x00\x01 HTTP/1.1\r\n\r\n")
        assert _answer(stream)[0] == "HTTP/1.1 400 Bad Request"
    assert app.asked == [] and app.served == []
