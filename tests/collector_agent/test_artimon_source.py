"""The artimon source against real ZooKeeper, real bookkeeper processes and real agents."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from artimon.servers import ZooKeeperServer
from artimon.stack import agent_properties
from artimon.testing import start_agent_process
from bookkeeper import Bookkeeper, EndpointInfo, resolve_zk
from bookkeeper.testing import AppProcess, start_app
from bookkeeper.wire import FramedThriftServer, endpoint_thrift
from collector_agent import Agent, Event
from collector_agent.group import members_at, owner


def poller_properties(zk: str, interval: int, agent_id: str, port: int | None = None, **poll: object) -> str:
    """An artimon source (with the ``poll`` keys) forwarding to the Thrift receiver on
    ``port``; without a port, its events stay in channel ``ch`` for the test to take."""
    source = {
        "type": "artimon",
        "zk": zk,
        "interval": interval,
        "agentId": agent_id,
        "sessionTimeout": 1,
        "readTimeout": 2,
        "connectTimeout": 1,
        "catchup": 0.8,
        **poll,
        "channels": "ch",
    }
    channels: dict[str, dict[str, object]] = {
        "ch": {"type": "memory", "capacity": 100000, "transactionCapacity": 1000}
    }
    if port is None:
        channels["idle"] = {"type": "memory"}
        sink: dict[str, object] = {"type": "null", "channel": "idle"}
    else:
        sink = {
            "type": "thrift",
            "channel": "ch",
            "hostname": "127.0.0.1",
            "port": port,
            "maxBackoffSleep": 100,
        }
    return agent_properties("g", sources={"poll": source}, channels=channels, sinks={"fwd": sink})


RECEIVER = agent_properties(  # what it receives stays in channel ch, for the test to take
    "r",
    sources={"in": {"type": "thrift", "bind": "127.0.0.1", "port": 0, "channels": "ch"}},
    channels={
        "ch": {"type": "memory", "capacity": 1000000, "transactionCapacity": 1000},
        "idle": {"type": "memory"},
    },
    sinks={"none": {"type": "null", "channel": "idle"}},
)


class Receiver:
    """The next hop: collects (endpoint, round) of every event it is sent."""

    def __init__(self) -> None:
        self.agent = Agent.from_properties(RECEIVER, "r", {})
        self.agent.start()
        self.port: int = self.agent.sources["in"].port  # type: ignore[attr-defined]
        self.events: list[tuple[str, int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while not self._stop.wait(0.02):
            while True:
                with self.agent.channels["ch"].transaction() as tx:
                    got: list[Event] = tx.take_batch(1000)
                now = time.time()
                self.events.extend(
                    (
                        e.headers["artimon.context"] + "@" + e.headers["artimon.endpoint"],
                        int(e.headers["artimon.round"]),
                        now,
                    )
                    for e in got
                )
                if not got:
                    break

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.agent.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def start_poller(config: Path, name: str = "g") -> subprocess.Popen[str]:
    return start_agent_process(config, name)


def test_a_join_counts_from_half_an_interval_after_it_a_group_starting_together_at_once() -> None:
    settled = {"a": 1_000, "b": 2_000}
    # c registered 0.2 s before the round: some members may not see it yet, so nobody counts it
    assert members_at(60_000, {**settled, "c": 59_800}, 30_000) == ["a", "b"]
    assert members_at(120_000, {**settled, "c": 59_800}, 30_000) == ["a", "b", "c"]
    # none settled (a group starting together): those registered before the round
    assert members_at(60_000, {"a": 59_000, "b": 59_500, "c": 60_100}, 30_000) == ["a", "b"]
    assert members_at(60_000, {"c": 60_100}, 30_000) == []


def test_rendezvous_moves_only_the_endpoints_of_a_leaving_agent() -> None:
    endpoints = [f"ctx/10.0.0.{i}:1:u" for i in range(300)]
    three = {e: owner(e, ["a", "b", "c"]) for e in endpoints}
    two = {e: owner(e, ["a", "c"]) for e in endpoints}
    assert all(two[e] == three[e] for e in endpoints if three[e] != "b")
    assert 70 < Counter(three.values())["b"] < 130
    assert owner("x", []) is None


@pytest.mark.slow
def test_three_agents_one_killed_every_endpoint_once_per_round(
    tmp_path: Path, zk_hosts: str, receiver: Receiver, wait: Callable[..., None]
) -> None:
    interval = 3
    apps: list[AppProcess] = []
    pollers: list[subprocess.Popen[str]] = []
    try:
        apps = [
            start_app(f"svc{k}", zk_hosts, variables=5, session_timeout=10, endpoints=10) for k in range(3)
        ]
        for n in range(3):
            config = tmp_path / f"agent{n}.properties"
            config.write_text(poller_properties(zk_hosts, interval, f"agent-{n}", receiver.port))
            pollers.append(start_poller(config))
        interval_ms = interval * 1000
        first = (int(time.time() * 1000) // interval_ms + 2) * interval_ms  # every agent counted by then
        wait(
            lambda: any(r >= first + 2 * interval_ms for _, r, _ in receiver.events),
            timeout=60,
            what="rounds",
        )
        # kill one agent in the middle of a round
        boundary = (int(time.time() * 1000) // interval_ms + 1) * interval_ms
        # early in a round: the session (1 s, reaped on a 0.5 s tick) ends before the catch-up at 0.8
        time.sleep(max(0.0, (boundary + interval_ms * 0.2) / 1000 - time.time()))
        os.kill(pollers[1].pid, signal.SIGKILL)
        killed_round = boundary
        last = killed_round + 3 * interval_ms
        wait(
            lambda: any(r >= last + interval_ms for _, r, _ in receiver.events),
            timeout=60,
            what="rounds after",
        )
        time.sleep(0.5)  # let the last round's events of every agent land
    finally:
        for poller in pollers:
            if poller.poll() is None:
                poller.send_signal(signal.SIGTERM)
                poller.wait(30)
            if poller.stdout:
                poller.stdout.close()
        for app in apps:
            app.kill()
    endpoints = {
        f"svc{k}-{n}@{host}:{port}:{uuid}"
        for k, app in enumerate(apps)
        for n, (host, port, uuid) in enumerate(app.endpoints)
    }
    seen = Counter((endpoint, r) for endpoint, r, _ in receiver.events if first <= r <= last)
    rounds = range(first, last + 1, interval_ms)
    missing = [(e, r) for r in rounds for e in endpoints if seen[(e, r)] == 0]
    assert not missing, (
        f"gaps: {missing[:5]} ({len(missing)}); killed in round {killed_round}, rounds {list(rounds)}"
    )
    duplicates = {key: n for key, n in seen.items() if n > 1}
    assert all(r == killed_round for _, r in duplicates), duplicates  # only where the kill struck
    assert len(seen) == len(endpoints) * len(rounds)  # after dedupe: exactly one per round


@pytest.mark.slow
def test_a_lone_agent_killed_and_restarted_within_a_round_leaves_no_gap(
    tmp_path: Path, zk_hosts: str, receiver: Receiver, wait: Callable[..., None]
) -> None:
    interval = 3
    interval_ms = interval * 1000
    app = start_app("lone", zk_hosts, variables=3, endpoints=5)
    config = tmp_path / "lone.properties"
    config.write_text(poller_properties(zk_hosts, interval, "lone", receiver.port))
    poller = start_poller(config)
    restarted: subprocess.Popen[str] | None = None
    try:
        first = (int(time.time() * 1000) // interval_ms + 1) * interval_ms
        wait(lambda: any(r >= first + interval_ms for _, r, _ in receiver.events), timeout=60, what="rounds")
        boundary = (int(time.time() * 1000) // interval_ms + 1) * interval_ms
        time.sleep(max(0.0, (boundary + interval_ms * 0.1) / 1000 - time.time()))
        os.kill(poller.pid, signal.SIGKILL)
        poller.wait(30)
        restarted = start_poller(config)
        last = boundary + 2 * interval_ms
        wait(lambda: any(r >= last for _, r, _ in receiver.events), timeout=60, what="rounds after")
        wait(lambda: sum(r == last for _, r, _ in receiver.events) >= 5, timeout=30, what="the last round")
    finally:
        for process in (poller, restarted):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(30)
            if process is not None and process.stdout:
                process.stdout.close()
        app.kill()
    endpoints = {f"lone-{n}@{host}:{port}:{uuid}" for n, (host, port, uuid) in enumerate(app.endpoints)}
    seen = Counter((endpoint, r) for endpoint, r, _ in receiver.events if first <= r <= last)
    missing = [(e, r) for r in range(first, last + 1, interval_ms) for e in endpoints if not seen[(e, r)]]
    assert not missing, f"gaps: {missing}; killed in round {boundary}"
    assert all(r == boundary for (_, r), n in seen.items() if n > 1), seen


@pytest.mark.slow
def test_a_hanging_endpoint_does_not_hold_the_round(
    tmp_path: Path, zk_hosts: str, wait: Callable[..., None]
) -> None:
    hang = socket.create_server(("127.0.0.1", 0))
    hang_port = hang.getsockname()[1]
    held: list[socket.socket] = []
    threading.Thread(target=lambda: [held.append(hang.accept()[0]) for _ in range(100)], daemon=True).start()
    connect, layout = resolve_zk(zk_hosts)
    zk = KazooClient(hosts=connect)
    zk.start(timeout=30)
    info = EndpointInfo("127.0.0.1", hang_port, "hang", "u1", {})
    zk.create(
        layout.endpoint("hang", "127.0.0.1", hang_port, "u1"), info.to_json(), ephemeral=True, makepath=True
    )
    app = start_app("good", zk_hosts, variables=3, endpoints=5)
    agent = Agent.from_properties(poller_properties(zk_hosts, 2, "solo"), "g", {})
    agent.start()
    arrivals: list[tuple[int, str, float]] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len({r for r, _, _ in arrivals}) < 3:
            with agent.channels["ch"].transaction() as tx:
                got = tx.take_batch(100)
            arrivals.extend(
                (int(e.headers["artimon.round"]), e.headers["artimon.context"], time.time()) for e in got
            )
            time.sleep(0.02)
        source = agent.sources["poll"]
        assert source.metrics()["PollFailCount"] >= 1  # the hanging one, each round
        assert any(key.startswith("hang/") for key in source.endpoint_failures)  # type: ignore[attr-defined]
    finally:
        agent.stop()
        app.kill()
        zk.stop()
        zk.close()
        hang.close()
        for conn in held:
            conn.close()
    by_round: dict[int, list[tuple[str, float]]] = {}
    for r, context, at in arrivals:
        by_round.setdefault(r, []).append((context, at))
    complete = [r for r, got in by_round.items() if len(got) == 5]
    assert complete, by_round
    for r in complete:
        assert {c for c, _ in by_round[r]} == {f"good-{n}" for n in range(5)}
        assert max(at for _, at in by_round[r]) < r / 1000 + 2  # within the round, despite the hang


@pytest.mark.slow
def test_zookeeper_restart_mid_run_and_everything_carries_on(
    tmp_path: Path, wait: Callable[..., None]
) -> None:
    zk_server = ZooKeeperServer(tmp_path / "zk", tick_time_ms=500)
    zk_server.start()
    app = start_app("survivor", zk_server.hosts, variables=3, session_timeout=4, endpoints=2)
    agent = Agent.from_properties(poller_properties(zk_server.hosts, 1, "solo", sessionTimeout=4), "g", {})
    agent.start()
    rounds: set[int] = set()

    def drain() -> set[int]:
        with agent.channels["ch"].transaction() as tx:
            rounds.update(int(e.headers["artimon.round"]) for e in tx.take_batch(1000))
        return rounds

    try:
        wait(lambda: len(drain()) >= 2, timeout=30, what="rounds before the restart")
        zk_server.stop()
        stopped_at = int(time.time() * 1000)
        wait(lambda: any(r > stopped_at for r in drain()), timeout=30, what="rounds while ZooKeeper is down")
        zk_server.start()
        restarted_at = int(time.time() * 1000) + 1000
        wait(lambda: any(r > restarted_at for r in drain()), timeout=30, what="rounds after the restart")
        client = KazooClient(hosts=zk_server.hosts)
        client.start(timeout=30)
        try:
            _, layout = resolve_zk(zk_server.hosts)
            wait(
                lambda: len(client.get_children(layout.context("survivor-0"))) == 1,
                timeout=30,
                what="the app back",
            )
            wait(
                lambda: client.get_children(layout.agents("default")) == ["solo"],
                timeout=30,
                what="the agent back",
            )
        finally:
            client.stop()
            client.close()
    finally:
        agent.stop()
        app.kill()
        zk_server.stop()


class _SlowOnce:
    """An endpoint whose first snapshot answers after 2.5 s, far past its round's deadline;
    the later ones at once."""

    def __init__(self) -> None:
        self.bk = Bookkeeper("slow-once", environ={})
        self.bk.integer("x").set(1)
        self.first_call_at: float | None = None
        self._lock = threading.Lock()

    def ping(self) -> int:
        return 1

    def snapshot(self) -> Any:
        with self._lock:
            first = self.first_call_at is None
            if first:
                self.first_call_at = time.time()
        if first:
            time.sleep(2.5)
        return self.bk.snapshot().to_thrift()


@pytest.mark.slow
def test_a_late_poll_keeps_its_connection_and_the_next_rounds_answer_on_time(
    zk_hosts: str, wait: Callable[..., None]
) -> None:
    """A poll abandoned at its round's deadline still owns its connection: the next rounds
    open a fresh one and are answered at once, instead of queueing behind the late answer on
    the same socket (where a round could read another's answer)."""
    handler = _SlowOnce()
    server = FramedThriftServer(endpoint_thrift.BookkeeperEndpoint, handler, name="slow-once")
    server.start()
    connect, layout = resolve_zk(zk_hosts)
    zk = KazooClient(hosts=connect)
    zk.start(timeout=30)
    info = EndpointInfo("127.0.0.1", server.port, "slow", "u1", {})
    zk.create(
        layout.endpoint("slow", "127.0.0.1", server.port, "u1"), info.to_json(), ephemeral=True, makepath=True
    )
    agent = Agent.from_properties(poller_properties(zk_hosts, 1, "solo", readTimeout=5), "g", {})
    agent.start()
    arrivals: dict[int, float] = {}
    try:
        wait(lambda: handler.first_call_at is not None, 30, "the first poll")
        assert handler.first_call_at is not None
        slow_round = int(handler.first_call_at) * 1000
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(slow_round + n * 1000 in arrivals for n in (1, 2, 3)):
            with agent.channels["ch"].transaction() as tx:
                got = tx.take_batch(100)
            for event in got:
                arrivals.setdefault(int(event.headers["artimon.round"]), time.time())
            time.sleep(0.02)
        metrics = agent.sources["poll"].metrics()
    finally:
        agent.stop()
        zk.stop()
        zk.close()
        server.stop()
    for n in (1, 2, 3):
        round_ms = slow_round + n * 1000
        assert round_ms in arrivals, (n, sorted(arrivals), slow_round)
        assert arrivals[round_ms] - round_ms / 1000 < 0.5, (n, arrivals[round_ms] - round_ms / 1000)
    assert slow_round not in arrivals  # the late answer is not emitted
    assert metrics["PollTimeoutCount"] == 1 and metrics["PollFailCount"] == 0
    assert server.stats["connections"] >= 2  # the late poll's own, and the fresh one after it
