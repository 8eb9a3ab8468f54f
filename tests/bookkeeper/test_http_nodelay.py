"""Our HTTP servers (``BackgroundServer``: the query API, remote write, VHMS's HTTP, the
monitoring ports) answer without Nagle's wait: an answer of 1-64 KB written as headers and
body would otherwise wait about 40 ms for the client's delayed ACK on a kept-alive
connection (issue 27: a 57 KB ``group_left`` answer took 51.7 ms, 5.6 ms without). The test
finds the server's end of a kept-alive connection among this process's sockets and reads
its ``TCP_NODELAY``, after a 50 KB answer went over it whole. And a small answer's head and
body leave together, in one TCP segment (the client's ``TCP_INFO`` counts the segments of
data it received)."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bookkeeper.ground import BackgroundServer

_BODY = b"x" * 50_000
_SMALL = b"y" * 1_000
_DATA_SEGS_IN = 152  # the offset of tcpi_data_segs_in in Linux's struct tcp_info (since 4.6)


async def _answer(request: Request) -> Response:
    return Response(_BODY, media_type="application/octet-stream")


async def _small(request: Request) -> Response:
    return Response(_SMALL, media_type="application/octet-stream")


def _read_answer(reader: socket.SocketIO) -> bytes:
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
    return body


def _server_end(client: socket.socket) -> socket.socket:
    """This process's socket whose peer is ``client`` (a duplicate: the caller closes it)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd == client.fileno() or not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
            continue
        try:
            candidate = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if candidate.type == socket.SOCK_STREAM and candidate.getpeername() == client.getsockname():
                return candidate
        except OSError:
            pass
        candidate.close()
    raise AssertionError("the server's end of the connection is not among this process's sockets")


@contextmanager
def _connected(route: Route) -> Iterator[tuple[socket.socket, socket.SocketIO]]:
    """A kept-alive connection to a ``BackgroundServer`` serving ``route``, and its reader."""
    server = BackgroundServer(Starlette(routes=[route]), "127.0.0.1", 0, name="nodelay")
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            yield sock, socket.SocketIO(sock, "rb")
    finally:
        server.stop()


def test_the_server_end_of_a_kept_alive_connection_has_nagle_off() -> None:
    with _connected(Route("/big", _answer)) as (sock, reader):
        for _ in range(2):  # kept alive: the second answer on the same connection
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert _read_answer(reader) == _BODY
        with _server_end(sock) as end:
            assert end.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def _data_segments_in(sock: socket.socket) -> int:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return int(struct.unpack_from("I", info, _DATA_SEGS_IN)[0])


def test_a_small_answer_leaves_in_one_segment() -> None:
    with _connected(Route("/small", _small)) as (sock, reader):
        for _ in range(3):
            before = _data_segments_in(sock)
            sock.sendall(b"GET /small HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert _read_answer(reader) == _SMALL
            assert _data_segments_in(sock) - before == 1
