"""Our HTTP servers (``BackgroundServer``: the query API, remote write, VHMS's HTTP, the
monitoring ports) answer without Nagle's wait: an answer of 1-64 KB written as headers and
body would otherwise wait about 40 ms for the client's delayed ACK on a kept-alive
connection (issue 27: a 57 KB ``group_left`` answer took 51.7 ms, 5.6 ms without)."""

from __future__ import annotations

import socket
import statistics
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bookkeeper.ground import BackgroundServer

_BODY = b"x" * 50_000
_ROUNDS = 21
_STALL_S = 0.035  # the delayed ACK's wait is 40 ms; an answer without it takes about 1 ms


async def _answer(request: Request) -> Response:
    return Response(_BODY, media_type="application/octet-stream")


def _exchange(sock: socket.socket, reader: socket.SocketIO) -> float:
    """One request on the kept-alive connection, its answer read whole: the seconds it took."""
    started = time.perf_counter()
    sock.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = reader.read(1)
        assert chunk, "the server closed the connection"
        head += chunk
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    body = b""
    while len(body) < length:
        chunk = reader.read(length - len(body))
        assert chunk, "the server closed the connection"
        body += chunk
    return time.perf_counter() - started


def test_a_50_kb_answer_on_a_kept_alive_connection_does_not_wait_for_the_delayed_ack() -> None:
    server = BackgroundServer(Starlette(routes=[Route("/big", _answer)]), "127.0.0.1", 0, name="nodelay")
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            reader = socket.SocketIO(sock, "rb")
            took = [_exchange(sock, reader) for _ in range(_ROUNDS)]
    finally:
        server.stop()
    # the median: a loaded machine delays some rounds, the stall delays every one
    assert statistics.median(took) < _STALL_S, [round(t * 1000, 1) for t in took]
