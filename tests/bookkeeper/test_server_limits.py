"""The framed Thrift server's limits against real sockets: connections made room for by
closing the idlest, per-peer limits, the silent, idle, trickling and non-reading deadlines,
buffers that grow with what arrives; and an attack of idle, half-open and trickling sockets
on an application process while a client and an agent keep polling it."""

from __future__ import annotations

import contextlib
import errno
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support import thread_count, vm_rss_kb

from artimon.stack import agent_properties
from bookkeeper import Bookkeeper, EndpointClient, EndpointUnavailableError, read_endpoint
from bookkeeper.testing import start_app
from bookkeeper.wire import FramedThriftServer, ServerLimits, endpoint_thrift
from collector_agent import Agent


class _Handler:
    """The endpoint's two calls; ``gate``, when set, holds every snapshot until it opens
    (``entered`` tells one is held)."""

    def __init__(self, bk: Bookkeeper, gate: threading.Event | None = None) -> None:
        self.bk = bk
        self.gate = gate
        self.entered = threading.Event()

    def ping(self) -> int:
        return 1

    def snapshot(self) -> Any:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(30)
        return self.bk.snapshot().to_thrift()


@contextlib.contextmanager
def serving(
    limits: ServerLimits, bk: Bookkeeper | None = None, **kwargs: Any
) -> Iterator[FramedThriftServer]:
    bk = bk or Bookkeeper("limits", environ={})
    bk.integer("hits").set(1)
    server = FramedThriftServer(
        endpoint_thrift.BookkeeperEndpoint,
        kwargs.pop("handler", None) or _Handler(bk),
        limits=limits,
        **kwargs,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def connect_from(source: str, server: FramedThriftServer) -> socket.socket:
    """A raw connection from the loopback address ``source`` (all of 127/8 is local)."""
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect((server.host, server.port))
    return sock


def closed_by_peer(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_a_newcomer_closes_the_idlest_connection_when_the_server_is_full(wait: Callable[..., None]) -> None:
    with serving(ServerLimits(max_connections=2)) as server:
        oldest, newer = EndpointClient(server.host, server.port), EndpointClient(server.host, server.port)
        with oldest, newer:
            oldest.ping()
            newer.ping()
            with EndpointClient(server.host, server.port, timeout=5) as newcomer:
                assert newcomer.ping() == 1  # served, not refused
            assert server.stats["evicted_full"] == 1
            assert server.stats["connections_refused"] == 0
            # the idlest was `oldest`: its next (idempotent) call reconnects and is served
            assert oldest.ping() == 1
            assert newer.ping() == 1
        wait(lambda: server.open_connections == 0, what="every connection closed")


def test_a_newcomer_is_refused_only_when_every_connection_is_busy() -> None:
    gate = threading.Event()
    handler = _Handler(Bookkeeper("busy", environ={}), gate)
    with serving(ServerLimits(max_connections=1), handler=handler) as server:
        busy = EndpointClient(server.host, server.port, timeout=10)
        worker = threading.Thread(target=busy.snapshot)
        worker.start()
        try:
            assert handler.entered.wait(10)
            with (
                EndpointClient(server.host, server.port, timeout=5) as newcomer,
                pytest.raises(EndpointUnavailableError),
            ):
                newcomer.ping()
            assert server.stats["connections_refused"] == 1
        finally:
            gate.set()
            worker.join(10)
            busy.close()


def test_a_peer_at_its_limit_loses_its_own_idlest_connection() -> None:
    with serving(ServerLimits(max_connections=10, max_connections_per_peer=2)) as server:
        other = connect_from("127.0.0.3", server)
        first, second = connect_from("127.0.0.2", server), connect_from("127.0.0.2", server)
        third = connect_from("127.0.0.2", server)
        try:
            assert closed_by_peer(first, 5)
            assert not closed_by_peer(second, 0.2) and not closed_by_peer(other, 0.2)
            assert server.stats["evicted_peer_limit"] == 1
        finally:
            for sock in (other, first, second, third):
                sock.close()


def test_when_full_the_peer_holding_the_most_gives_way() -> None:
    with serving(ServerLimits(max_connections=4, max_connections_per_peer=4)) as server:
        small = connect_from("127.0.0.3", server)  # the oldest of all, but its peer holds one
        hog = [connect_from("127.0.0.2", server) for _ in range(3)]
        try:
            with EndpointClient(server.host, server.port, timeout=5) as newcomer:
                assert newcomer.ping() == 1
            assert closed_by_peer(hog[0], 5)
            assert not closed_by_peer(small, 0.2)
            assert server.stats["evicted_full"] == 1
        finally:
            for sock in (small, *hog):
                sock.close()


def test_a_silent_connection_is_closed_after_the_first_frame_timeout() -> None:
    with serving(ServerLimits(first_frame_timeout=0.5)) as server, connect_from("127.0.0.1", server) as sock:
        started = time.monotonic()
        assert closed_by_peer(sock, 5)
        assert 0.4 < time.monotonic() - started < 3
        assert server.stats["silent_closed"] == 1


def test_an_idle_connection_is_closed_after_the_idle_timeout(wait: Callable[..., None]) -> None:
    limits = ServerLimits(first_frame_timeout=0.2, idle_timeout=1.0)
    with serving(limits) as server, EndpointClient(server.host, server.port) as client:
        assert client.ping() == 1
        time.sleep(0.5)  # past the first-frame timeout: a connection that spoke is not silent
        assert server.open_connections == 1 and server.stats["silent_closed"] == 0
        wait(lambda: server.stats["idle_closed"] == 1, 5, "the idle connection closed")
        assert client.ping() == 1  # idempotent: tried again on a fresh connection


def test_a_trickled_frame_is_cut_at_the_frame_timeout() -> None:
    """A per-read timeout never fires on a peer that sends a byte every 50 ms; the frame's
    deadline does."""
    with serving(ServerLimits(frame_timeout=1.0)) as server, connect_from("127.0.0.1", server) as sock:
        sock.sendall(struct.pack("!i", 1000))
        started = time.monotonic()
        cut = False
        while time.monotonic() - started < 5 and not cut:
            try:
                sock.sendall(b"x")
            except OSError:
                cut = True
            cut = cut or closed_by_peer(sock, 0.05)
        assert cut
        assert 0.9 < time.monotonic() - started < 3
        assert server.stats["slow_frames"] == 1


def test_a_client_that_does_not_read_its_answers_is_cut_at_the_frame_timeout(
    wait: Callable[..., None],
) -> None:
    bk = Bookkeeper("big", environ={})
    for i in range(20_000):
        bk.integer("bulk", i=str(i)).set(i)
    with serving(ServerLimits(frame_timeout=1.0), bk) as server:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((server.host, server.port))
        with sock:
            request = bytes(_snapshot_request())
            for _ in range(40):  # answers of several MB pile up: the server's send blocks
                sock.sendall(request)
            wait(lambda: server.stats["slow_readers"] == 1, 10, "the non-reading client cut")


def _snapshot_request() -> bytearray:
    from thriftpy2.protocol import TCyBinaryProtocolFactory
    from thriftpy2.thrift import TMessageType
    from thriftpy2.transport import TCyMemoryBuffer

    out = TCyMemoryBuffer()
    protocol = TCyBinaryProtocolFactory().get_protocol(out)
    protocol.write_message_begin("snapshot", TMessageType.CALL, 1)
    endpoint_thrift.BookkeeperEndpoint.snapshot_args().write(protocol)
    protocol.write_message_end()
    payload = out.getvalue()
    return bytearray(struct.pack("!i", len(payload)) + payload)


def test_an_announced_frame_holds_memory_only_for_the_bytes_that_arrived() -> None:
    """Eight peers announce 64 MiB frames and send ten bytes each: the server must not
    allocate what they announced (it did: 512 MiB)."""
    import os

    pid = os.getpid()
    with serving(ServerLimits(max_frame_size=64 * 1024 * 1024, frame_timeout=30)) as server:
        before = vm_rss_kb(pid)
        socks = [connect_from("127.0.0.1", server) for _ in range(8)]
        try:
            for sock in socks:
                sock.sendall(struct.pack("!i", 64 * 1024 * 1024) + b"0123456789")
            time.sleep(0.5)  # the server reads what arrived
            assert server.open_connections == 8
            assert vm_rss_kb(pid) - before < 64 * 1024
        finally:
            for sock in socks:
                sock.close()


# -- the attack ------------------------------------------------------------------------------


def properties(zk: str) -> str:
    """An agent polling every second into nothing."""
    poll = {
        "type": "artimon",
        "zk": zk,
        "interval": 1,
        "agentId": "under-attack",
        "readTimeout": 0.9,
        "connectTimeout": 0.9,
        "channels": "ch",
    }
    return agent_properties(
        "a",
        sources={"poll": poll},
        channels={"ch": {"type": "memory", "capacity": 10000}},
        sinks={"drain": {"type": "null", "channel": "ch"}},
    )


class Attacker:
    """Holds ``idle`` silent sockets, ``half_open`` ones that sent half a frame header and
    ``trickling`` ones that announced a frame and send it a byte every 100 ms, from three
    loopback addresses (the well-behaved clients' own among them); whatever the server
    closes is opened again at once."""

    SOURCES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")

    def __init__(self, host: str, port: int, idle: int, half_open: int, trickling: int) -> None:
        self.address = (host, port)
        self.plan = [("idle", b"")] * idle + [("half", b"\x00\x00")] * half_open
        self.plan += [("trickle", struct.pack("!i", 60_000))] * trickling
        self.socks: list[socket.socket | None] = [None] * len(self.plan)
        self.opened = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _open(self, slot: int) -> None:
        sock = socket.socket()
        try:
            sock.bind((self.SOURCES[slot % len(self.SOURCES)], 0))
            sock.connect(self.address)
            sock.sendall(self.plan[slot][1])
        except OSError:
            sock.close()
            return
        sock.setblocking(False)
        self.socks[slot] = sock
        self.opened += 1

    def _alive(self, slot: int, sock: socket.socket) -> bool:
        try:
            if self.plan[slot][0] == "trickle":
                sock.send(b"x")
            return sock.recv(1) != b""
        except BlockingIOError:
            return True
        except OSError as exc:
            return exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK)

    def _run(self) -> None:
        while not self._stop.is_set():
            for slot, sock in enumerate(self.socks):
                if sock is not None and not self._alive(slot, sock):
                    sock.close()
                    self.socks[slot] = sock = None
                if sock is None:
                    self._open(slot)
            self._stop.wait(0.1)

    def __enter__(self) -> Attacker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        for sock in self.socks:
            if sock is not None:
                sock.close()


@pytest.mark.slow
def test_idle_half_open_and_trickling_sockets_leave_the_endpoint_serving(
    zk_hosts: str, wait: Callable[..., None]
) -> None:
    app = start_app("attacked", zk_hosts, variables=500)
    agent = Agent.from_properties(properties(zk_hosts), "a", {})
    agent.start()
    try:
        source = agent.sources["poll"]
        wait(lambda: source.metrics()["PollSuccessCount"] >= 2, 30, "the agent polling the app")
        pid = app.process.pid
        rss_before, threads_before = vm_rss_kb(pid), thread_count(pid)
        polls_before = source.metrics()
        latencies: list[float] = []
        peak_threads = 0
        with (
            Attacker(app.host, app.port, idle=150, half_open=50, trickling=50) as attacker,
            EndpointClient(app.host, app.port, timeout=2) as kept,
        ):
            started = time.monotonic()
            while time.monotonic() - started < 8:
                for read in (kept.snapshot, lambda: read_endpoint(app.host, app.port, timeout=2)):
                    began = time.monotonic()
                    assert len(read()) == 503
                    latencies.append(time.monotonic() - began)
                peak_threads = max(peak_threads, thread_count(pid))
                time.sleep(0.1)
            assert attacker.opened > 250  # it kept at it: the server kept closing its sockets
            rss_during = vm_rss_kb(pid)
        after = source.metrics()
        assert max(latencies) < 1.0, sorted(latencies)[-5:]
        assert after["PollSuccessCount"] - polls_before["PollSuccessCount"] >= 7
        for counter in ("PollFailCount", "PollTimeoutCount", "RoundOverrunCount"):
            assert after[counter] == polls_before[counter], counter
        assert peak_threads <= threads_before + 64 + 16
        assert rss_during - rss_before < 40 * 1024
        wait(lambda: thread_count(pid) <= threads_before + 2, 30, "the attack's threads gone")
    finally:
        agent.stop()
        app.kill()
