"""A registered member that accepts TCP and never answers (a hung replica, a hung app) is
skipped after a bounded time and counted, by the vhms sink and by the artimon source; the
members are registered with the platform's credentials, as ACLs require."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from artimon.stack import agent_properties
from bookkeeper import Bookkeeper, EndpointInfo
from bookkeeper.ground import encode_sample_batch
from bookkeeper.testing import start_app
from bookkeeper.zk import AUTH_ENV, AUTH_FILE_ENV, Registration, ZkAuth, resolve_zk
from collector_agent import Agent, Context, Event
from collector_agent.sinks.vhms import VhmsSink
from vhms.server import Store, VhmsService


class HungServer:
    """Accepts every connection, reads whatever comes, never answers; records how long each
    connection stayed open (until the client gave up and closed it)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.held: list[float] = []  # seconds each closed connection was held
        self.open = 0
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        accepted = time.monotonic()
        self.accepted += 1
        self.open += 1
        with conn:
            try:
                while conn.recv(65536):
                    pass
            except OSError:
                pass
        self.open -= 1
        self.held.append(time.monotonic() - accepted)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def auth(monkeypatch: pytest.MonkeyPatch) -> ZkAuth:
    credentials = ZkAuth("artimon", uuid.uuid4().hex)
    monkeypatch.setenv(AUTH_ENV, f"{credentials.user}:{credentials.password}")
    monkeypatch.delenv(AUTH_FILE_ENV, raising=False)
    return credentials


@pytest.fixture
def hung() -> Iterator[HungServer]:
    server = HungServer()
    yield server
    server.close()


def _events(n: int) -> list[Event]:
    bk = Bookkeeper("shop", labels={})
    bk.integer("orders", batch=str(n)).set(n)
    return [Event({}, encode_sample_batch(bk.snapshot()))]


def _timed(call: Callable[[], None]) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


def test_the_vhms_sink_skips_a_hung_replica_after_its_timeout_and_counts_it(
    zk_hosts: str, auth: ZkAuth, hung: HungServer, wait: Callable[..., None]
) -> None:
    vhms = VhmsService(Store(), shard="s1", http_port=None)
    vhms.start(zk_hosts)
    connect, layout = resolve_zk(zk_hosts)
    replica = Registration(
        connect,
        layout.vhms_member("s1", "127.0.0.1", hung.port),
        b'{"shard": "s1", "host": "127.0.0.1", "port": %d}' % hung.port,
    )
    replica.start()
    sink = VhmsSink("k1")
    # generous enough that the live member answers within ``timeout`` on a loaded machine
    timeout, backoff = 2.5, 3.0
    sink.configure(
        Context(
            {"zk": zk_hosts, "timeout": str(timeout), "memberBackoff": str(backoff), "shardGrace": "0"},
            "a1.sinks.k1.",
        )
    )
    sink.start()
    try:
        assert replica.registered.wait(30)
        wait(lambda: len(sink.shards.get("s1", [])) == 2, what="s1 with its two members")
        first = _timed(lambda: sink.deliver(_events(1)))  # waits for the hung one, once
        assert timeout * 0.9 <= first < 2 * timeout, first
        assert sink.metrics()["MemberFailCount"] == 1 and hung.accepted == 1
        wait(lambda: len(hung.held) == 1, what="the hung connection closed by the sink")
        assert hung.held[0] < 2 * timeout and hung.open == 0  # given up on within the timeout
        second = _timed(lambda: sink.deliver(_events(2)))  # passed over: not even connected to
        assert second < timeout and hung.accepted == 1 and sink.metrics()["MemberFailCount"] == 1
        time.sleep(backoff)  # the backoff over, the member is tried again, and fails again
        third = _timed(lambda: sink.deliver(_events(3)))
        assert timeout * 0.9 <= third < 2 * timeout and sink.metrics()["MemberFailCount"] == 2
        assert hung.accepted == 2
        time.sleep(backoff)  # a second failure in a row doubles the backoff: still passed over
        assert _timed(lambda: sink.deliver(_events(4))) < timeout
        assert sink.metrics()["MemberFailCount"] == 2 and hung.accepted == 2
        assert vhms.store.series == 4  # every batch stored on the live member
    finally:
        sink.stop()
        replica.close()
        vhms.stop()


def poller(zk: str, read_timeout: float) -> str:
    """An artimon source polling every 2 s into nothing."""
    poll = {
        "type": "artimon",
        "zk": zk,
        "interval": 2,
        "readTimeout": read_timeout,
        "connectTimeout": 1,
        "channels": "ch",
    }
    return agent_properties(
        "g",
        sources={"poll": poll},
        channels={"ch": {"type": "memory", "capacity": 10000}},
        sinks={"drop": {"type": "null", "channel": "ch"}},
    )


@pytest.mark.slow
def test_the_artimon_source_skips_a_hung_endpoint_after_its_read_timeout_and_counts_it(
    zk_hosts: str, auth: ZkAuth, hung: HungServer, wait: Callable[..., None]
) -> None:
    connect, layout = resolve_zk(zk_hosts)
    info = EndpointInfo("127.0.0.1", hung.port, "hung", "h1", {})
    endpoint = Registration(connect, layout.endpoint("hung", info.host, info.port, info.uuid), info.to_json())
    endpoint.start()
    app = start_app("good", zk_hosts, variables=3)
    read_timeout = 0.5
    agent = Agent.from_properties(poller(zk_hosts, read_timeout), "g", {})
    agent.start()
    try:
        assert endpoint.registered.wait(30)
        source = agent.sources["poll"]
        # the good endpoint polled in two rounds too (on a loaded machine the first round may
        # run before the app has registered)
        wait(
            lambda: source.metrics()["PollFailCount"] >= 2 and source.metrics()["PollSuccessCount"] >= 2,
            30,
            "two rounds' failed polls of the hung endpoint and two good ones",
        )
        metrics = source.metrics()
        assert metrics["PollTimeoutCount"] == 0  # cut by readTimeout, never left to the round's deadline
        assert metrics["RegistrationRefusedCount"] == 0
        assert set(source.endpoint_failures) == {f"hung/127.0.0.1:{hung.port}:h1"}  # type: ignore[attr-defined]
        wait(lambda: len(hung.held) >= 2, what="the hung connections closed by the poller")
        assert max(hung.held) < read_timeout + 0.5, hung.held
    finally:
        agent.stop()
        app.kill()
        endpoint.close()
