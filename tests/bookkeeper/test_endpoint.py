from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from bookkeeper import (
    Bookkeeper,
    EndpointClient,
    EndpointServer,
    EndpointUnavailableError,
    FrameTooLargeError,
    MalformedFrameError,
    VarType,
    WireError,
    read_endpoint,
)
from bookkeeper.wire import ServerLimits


@pytest.fixture
def served() -> Iterator[tuple[Bookkeeper, EndpointServer]]:
    bk = Bookkeeper("endpoint-test", environ={})
    bk.integer("hits", method="GET").set(42)
    bk.double("load").set(0.75)
    bk.boolean("up").set(True)
    bk.string("version", build="a b").set("1.0 'rc'")
    server = bk.serve(register=False)
    yield bk, server
    bk.close()


def _raw(server: EndpointServer) -> socket.socket:
    return socket.create_connection((server.host, server.port), timeout=5)


def _sent_then_hung_up(sock: socket.socket, data: bytes) -> bool:
    """Send ``data``; True once the peer closed (a reset or a refused send counts: the
    server may hang up before it has read everything)."""
    try:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        return sock.recv(1024) == b""
    except TimeoutError:
        return False  # still open: the server did not hang up
    except OSError:
        return True


def test_reads_all_four_types_over_a_socket(served: tuple[Bookkeeper, EndpointServer]) -> None:
    _, server = served
    batch = read_endpoint(server.host, server.port)
    got = {s.name: (s.type, s.value, s.labels) for s in batch.samples()}
    assert got["hits"][:2] == (VarType.INTEGER, 42)
    assert got["hits"][2]["method"] == "GET"
    assert got["load"][:2] == (VarType.DOUBLE, 0.75)
    assert got["up"][:2] == (VarType.BOOLEAN, True)
    assert got["version"][:2] == (VarType.STRING, "1.0 'rc'")
    assert got["version"][2]["build"] == "a b"
    assert batch.context == "endpoint-test"
    assert all(s.labels["context"] == "endpoint-test" for s in batch.samples())


def test_a_connection_is_reused_and_sees_updates(served: tuple[Bookkeeper, EndpointServer]) -> None:
    bk, server = served
    with EndpointClient(server.host, server.port) as client:
        assert client.ping() == 1
        bk.integer("hits", method="GET").add(1)
        batch = client.snapshot()
    assert {s.name: s.value for s in batch.samples()}["hits"] == 43
    assert server.stats["connections"] == 1
    assert server.stats["requests"] == 2


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x10" + b"\xff" * 16,  # a frame of junk
        b"\x00\x00\x00\x00",  # an empty frame
        b"\xff\xff\xff\xff",  # a negative length
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # someone's browser
        struct.pack("!i", 12) + struct.pack("!iH", -2147418111, 8) + b"snap",  # truncated call
    ],
)
def test_garbage_closes_only_that_connection(
    served: tuple[Bookkeeper, EndpointServer], garbage: bytes
) -> None:
    _, server = served
    with EndpointClient(server.host, server.port) as bystander:
        assert bystander.ping() == 1
        with _raw(server) as sock:
            assert _sent_then_hung_up(sock, garbage)
        assert len(bystander.snapshot()) == 4
    assert len(read_endpoint(server.host, server.port)) == 4


def test_an_oversized_frame_is_refused_unread(served: tuple[Bookkeeper, EndpointServer]) -> None:
    _, server = served
    with _raw(server) as sock:
        assert _sent_then_hung_up(sock, struct.pack("!i", 1 << 30) + b"x" * 1024)
    assert server.stats["bad_frames"] == 1
    assert len(read_endpoint(server.host, server.port)) == 4


def test_client_refuses_an_answer_larger_than_its_limit(
    served: tuple[Bookkeeper, EndpointServer],
) -> None:
    bk, server = served
    for i in range(2000):
        bk.integer("bulk", i=str(i)).set(i)
    with (
        EndpointClient(server.host, server.port, max_frame_size=4096) as client,
        pytest.raises(FrameTooLargeError, match="exceeds the maximum of 4096"),
    ):
        client.snapshot()


class _Liar:
    """A peer that answers one call with a fixed payload, to test the client's defenses."""

    def __init__(self, answer: bytes) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.answer = answer
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(self.answer)
            conn.recv(1)  # until the client hangs up

    def __enter__(self) -> _Liar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.thread.join(timeout=10)
        self.listener.close()


def _framed(payload: bytes) -> bytes:
    return struct.pack("!i", len(payload)) + payload


@pytest.mark.parametrize(
    "answer",
    [
        _framed(b"\x80\x01\x00\x02junk"),
        _framed(  # a reply whose struct holds a string claiming 2 GB
            b"\x80\x01\x00\x02\x00\x00\x00\x08snapshot\x00\x00\x00\x00"
            b"\x0c\x00\x00\x0b\x00\x02\x7f\xff\xff\xffabc"
        ),
        _framed(  # a well-formed reply whose batch columns disagree
            b"\x80\x01\x00\x02\x00\x00\x00\x08snapshot\x00\x00\x00\x00\x0c\x00\x00"
            b"\x0b\x00\x09\x00\x00\x00\x01\x07\x00\x00"
        ),
    ],
)
def test_client_reports_a_garbage_answer(answer: bytes) -> None:
    with (
        _Liar(answer) as liar,
        EndpointClient("127.0.0.1", liar.port, timeout=5) as client,
        pytest.raises(MalformedFrameError),
    ):
        client.snapshot()


def test_client_times_out_on_a_silent_peer() -> None:
    started = time.monotonic()
    with (
        _Liar(b"") as liar,
        EndpointClient("127.0.0.1", liar.port, timeout=0.5) as client,
        pytest.raises(EndpointUnavailableError),
    ):
        client.snapshot()
    assert time.monotonic() - started < 5


def test_client_reports_a_closed_port() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(EndpointUnavailableError, match="connect"):
        read_endpoint("127.0.0.1", port, timeout=2)


def test_a_client_carries_one_call_at_a_time(wait: Callable[..., None]) -> None:
    """A second call on a client whose call is under way is refused at once instead of
    sharing its socket (two rounds of an agent once read each other's answers that way)."""
    outcome: list[BaseException] = []

    def first_call() -> None:
        try:
            client.snapshot()
        except EndpointUnavailableError as exc:  # the peer never answers
            outcome.append(exc)

    with _Liar(b"") as liar, EndpointClient("127.0.0.1", liar.port, timeout=1.5) as client:
        first = threading.Thread(target=first_call)
        first.start()
        wait(lambda: client.is_open, 5, "the first call under way")
        started = time.monotonic()
        with pytest.raises(WireError, match="already under way"):
            client.ping()
        assert time.monotonic() - started < 0.5
        first.join(10)
    assert len(outcome) == 1


def test_an_idempotent_call_survives_a_connection_the_server_closed_while_idle(
    wait: Callable[..., None],
) -> None:
    """The server's idle timeout closes a kept-alive connection; the client's next request is
    written into the dead socket and its answer is an end-of-file: tried again, fresh."""
    bk = Bookkeeper("stale", environ={})
    bk.integer("x").set(1)
    server = bk.serve(register=False, limits=ServerLimits(idle_timeout=0.3, max_frame_size=64 * 1024))
    try:
        with EndpointClient(server.host, server.port) as client:
            assert client.ping() == 1
            wait(lambda: server.stats.get("idle_closed") == 1, 5, "the server to close the idle connection")
            assert client.is_open  # the client has not noticed
            assert len(client.snapshot()) == 1
            assert server.stats["connections"] == 2
            wait(lambda: server.stats.get("idle_closed") == 2, 5, "the second idle close")
            with pytest.raises(EndpointUnavailableError):  # not idempotent: not tried again
                client.call("ping")
    finally:
        bk.close()
