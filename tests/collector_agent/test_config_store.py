"""The central configuration in a real ZooKeeper: versions written once behind a pointer
moved by compare-and-set, bounded history, garbage refused; an agent that follows its group
or its own configuration, applies each new version by difference and reports the outcome."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from artimon.stack import agent_properties
from bookkeeper import resolve_zk
from bookkeeper.zk import ZkLayout
from collector_agent import (
    Agent,
    AgentReport,
    ConfigConflictError,
    ConfigFollower,
    ConfigStore,
    ConfigTarget,
    MalformedConfigError,
    Pointer,
)
from collector_agent.config_store import MAX_CONFIG_BYTES, MAX_RECORD_BYTES

GROUP = ConfigTarget("group", "edge")


def properties(total: int = 0, sink: str = "null") -> str:
    return agent_properties(
        "a1",
        sources={"r1": {"type": "seq", "batchSize": 10, "totalEvents": total, "channels": "c1"}},
        channels={"c1": {"type": "memory", "capacity": 1000, "transactionCapacity": 100}},
        sinks={"k1": {"type": sink, "channel": "c1"}},
    )


@pytest.fixture
def client(zk_hosts: str) -> Iterator[tuple[KazooClient, ZkLayout]]:
    connect, layout = resolve_zk(zk_hosts)
    kazoo = KazooClient(hosts=connect)
    kazoo.start(timeout=30)
    yield kazoo, layout
    kazoo.stop()
    kazoo.close()


@pytest.fixture
def store(client: tuple[KazooClient, ZkLayout]) -> ConfigStore:
    return ConfigStore(client[0], client[1], None, by="tester@here")


def test_each_push_is_a_new_version_behind_the_pointer_and_history_is_bounded(store: ConfigStore) -> None:
    assert store.current(GROUP) is None and store.versions(GROUP) == []
    first = store.write(GROUP, properties(1))
    assert first == Pointer(1, 0, first.at_ms, "tester@here")
    for total in range(2, 7):
        pointer = store.write(GROUP, properties(total), keep=3)
    assert pointer.version == 6 and pointer.previous == 5
    assert store.versions(GROUP) == [4, 5, 6]
    assert store.read(GROUP, 4)[0] == properties(4)
    back = store.point(GROUP, 5, rolled_back_from=6)
    assert (back.version, back.previous, back.rolled_back_from) == (5, 6, 6)
    assert store.current(GROUP) == back
    with pytest.raises(Exception, match="group edge has no version 1 \\(kept: 4, 5, 6\\)"):
        store.read(GROUP, 1)
    with pytest.raises(Exception, match="exceeds"):
        store.write(GROUP, "x" * (MAX_CONFIG_BYTES + 1))


def test_a_push_that_lost_the_race_writes_nothing(
    store: ConfigStore, client: tuple[KazooClient, ZkLayout]
) -> None:
    store.write(GROUP, properties(1))
    kazoo, layout = client
    real_versions = store.versions
    # another writer moves the pointer between our read of the versions and our transaction
    store.versions = lambda target: (  # type: ignore[method-assign]
        kazoo.set(f"{layout.group_config('edge')}/current", Pointer(1, 0, 0, "other").to_json()),
        real_versions(target),
    )[1]
    with pytest.raises(ConfigConflictError, match="another push changed group edge meanwhile"):
        store.write(GROUP, properties(2))
    store.versions = real_versions  # type: ignore[method-assign]
    assert store.versions(GROUP) == [1] and store.current(GROUP) == Pointer(1, 0, 0, "other")


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"{",
        b"[1]",
        b'{"version": 0}',
        b'{"version": "1"}',
        b'{"version": true}',
        b"x" * (MAX_RECORD_BYTES + 1),
    ],
)
def test_garbage_pointers_and_reports_are_refused_by_name(garbage: bytes) -> None:
    with pytest.raises(MalformedConfigError, match="configuration pointer"):
        Pointer.from_json(garbage)
    with pytest.raises(MalformedConfigError, match="agent configuration report"):
        AgentReport.from_json(garbage)


def test_a_version_that_is_not_utf8_is_refused(
    store: ConfigStore, client: tuple[KazooClient, ZkLayout]
) -> None:
    store.write(GROUP, properties(1))
    kazoo, layout = client
    kazoo.set(f"{layout.group_config('edge')}/v0000000001", b"\xff\xfe")
    with pytest.raises(MalformedConfigError, match="is not UTF-8"):
        store.read(GROUP, 1)


def _report(store: ConfigStore, agent_id: str) -> AgentReport | None:
    report = store.reports().get(agent_id)
    assert not isinstance(report, MalformedConfigError)
    return report


def test_an_agent_follows_its_group_its_own_overrides_and_refusals_are_reported(
    zk_hosts: str, store: ConfigStore, wait: Callable[..., None]
) -> None:
    agent = Agent.from_properties(properties(), "a1", {})
    agent.start()
    follower = ConfigFollower(agent, zk_hosts, agent_id="edge-1", group="edge", refresh=1.0)
    follower.start()
    try:
        wait(lambda: _report(store, "edge-1") is not None, what="the agent's first report")
        assert _report(store, "edge-1") == AgentReport("edge", "", 0, 0, "", _report(store, "edge-1").at_ms)  # type: ignore[union-attr]
        store.write(GROUP, properties(7))
        wait(lambda: agent.metrics()["SINK.k1"]["EventDrainSuccessCount"] == 7, what="version 1's events")
        wait(lambda: (_report(store, "edge-1") or AgentReport("", "", 0, 0, "", 0)).version == 1, what="v1")
        # a bad version: refused, the running one kept, the reason reported
        store.write(GROUP, properties(7).replace("capacity = 1000", "capacity = lots"))
        wait(lambda: _report(store, "edge-1").refused == 2, what="the refusal of v2")  # type: ignore[union-attr]
        report = _report(store, "edge-1")
        assert report is not None and report.version == 1 and report.follows == "group/edge"
        assert "a1.channels.c1.capacity" in report.reason and agent.reload_failures == 1
        store.point(GROUP, 1, rolled_back_from=2)
        # the agent's own configuration wins over its group's
        store.write(ConfigTarget("agent", "edge-1"), properties(3, sink="logger"))
        wait(lambda: _report(store, "edge-1").follows == "agent/edge-1", what="the override")  # type: ignore[union-attr]
        wait(lambda: _report(store, "edge-1").version == 1, what="the override applied")  # type: ignore[union-attr]
        assert agent.spec.sinks["k1"].type == "logger" and follower.running == ("agent/edge-1", 1)
        assert agent.reload_failures == 1  # v2 was not tried again when the pointer moved back
    finally:
        follower.stop()
        agent.stop()
    wait(lambda: _report(store, "edge-1") is None, what="the ephemeral report gone with the agent")


def test_a_second_agent_with_the_same_id_does_not_overwrite_the_first_report(
    zk_hosts: str, store: ConfigStore, wait: Callable[..., None], caplog: pytest.LogCaptureFixture
) -> None:
    agents = [Agent.from_properties(properties(), "a1", {}) for _ in range(2)]
    followers = [
        ConfigFollower(agent, zk_hosts, agent_id="same", group=f"g{n}") for n, agent in enumerate(agents)
    ]
    for agent in agents:
        agent.start()
    try:
        followers[0].start()
        wait(lambda: _report(store, "same") is not None, what="the first report")
        followers[1].start()
        wait(lambda: "another process reports as agent id same" in caplog.text, what="the complaint")
        assert json.loads(store.client.get(store.layout.config_status("same"))[0])["group"] == "g0"
    finally:
        for follower in followers:
            follower.stop()
        for agent in agents:
            agent.stop()


def test_a_garbage_pointer_or_version_is_refused_and_reported_and_the_next_push_applies(
    zk_hosts: str, store: ConfigStore, wait: Callable[..., None]
) -> None:
    agent = Agent.from_properties(properties(), "a1", {})
    agent.start()
    follower = ConfigFollower(agent, zk_hosts, group="edge", refresh=1.0)
    follower.start()
    current = f"{store.layout.group_config('edge')}/current"
    try:
        store.write(GROUP, properties(1))
        wait(lambda: follower.running == ("group/edge", 1), what="version 1")
        store.client.set(current, b"\x00garbage")
        wait(
            lambda: _report(store, "a1").refused == 0 and "not JSON" in _report(store, "a1").reason,
            what="refusal",
        )  # type: ignore[union-attr]
        store.client.set(current, Pointer(1, 0, 0, "x").to_json())
        store.client.create(f"{store.layout.group_config('edge')}/v0000000002", b"\xff\xfe")
        store.client.set(current, Pointer(2, 1, 0, "x").to_json())
        wait(lambda: _report(store, "a1").refused == 2, what="the refusal of a version that is not UTF-8")  # type: ignore[union-attr]
        assert "is not UTF-8 text" in _report(store, "a1").reason and agent.reloads == 1  # type: ignore[union-attr]
        store.write(GROUP, properties(2))
        wait(lambda: _report(store, "a1").version == 3, what="the next push applied")  # type: ignore[union-attr]
    finally:
        follower.stop()
        agent.stop()
