from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from artimon.stack import agent_properties
from collector_agent import Agent, ConfigFollower, ConfigStore, ConfigTarget, Event
from collector_agent.monitoring import MonitorServer, SelfReporter
from collector_agent.reloader import ConfigWatcher


def pipeline(
    total: int,
    sink_batch: int,
    *,
    capacity: object = 10000,
    idle_channel: bool = False,
    sink_channel: str = "c1",
) -> str:
    """``total`` events from a seq source into channel c1, and a null sink reading
    ``sink_channel``; ``idle_channel`` adds a channel nothing puts into (a sink reading it
    leaves c1 to fill up)."""
    channels: dict[str, dict[str, object]] = {
        "c1": {"type": "memory", "capacity": capacity, "transactionCapacity": 1000}
    }
    if idle_channel:
        channels["idle"] = {"type": "memory"}
    return agent_properties(
        "a1",
        sources={"r1": {"type": "seq", "batchSize": 100, "totalEvents": total, "channels": "c1"}},
        channels=channels,
        sinks={"k1": {"type": "null", "channel": sink_channel, "batchSize": sink_batch}},
    )


def test_seq_to_memory_to_null_moves_everything(wait: Callable[..., None]) -> None:
    agent = Agent.from_properties(pipeline(5000, 1000), "a1", {})
    agent.start()
    try:
        wait(lambda: agent.metrics()["SINK.k1"]["EventDrainSuccessCount"] == 5000, what="5000 drained")
        metrics = agent.metrics()
        assert metrics["SOURCE.r1"]["EventAcceptedCount"] == 5000
        assert metrics["CHANNEL.c1"]["EventPutSuccessCount"] == 5000
        assert metrics["CHANNEL.c1"]["ChannelSize"] == 0
    finally:
        agent.stop()
    after = agent.metrics()
    assert after["CHANNEL.c1"]["StopTime"] > 0 and after["SINK.k1"]["StopTime"] > 0


def test_a_stop_hands_on_what_its_channels_hold() -> None:
    agent = Agent.from_properties(pipeline(0, 100, capacity=100_000), "a1", {})
    agent.start()
    for _ in range(50):  # the source is idle: these wait in c1 for the sink
        with agent.channels["c1"].transaction() as tx:
            tx.put_batch([Event({}, b"x")] * 1000)
    agent.stop()
    metrics = agent.metrics()
    assert metrics["SINK.k1"]["EventDrainSuccessCount"] == 50_000
    assert metrics["CHANNEL.c1"]["ChannelSize"] == 0


def test_reload_keeps_a_channels_events_and_restarts_only_what_changed(wait: Callable[..., None]) -> None:
    # k1 first reads an idle channel, so c1 fills up; the reload points k1 at c1
    stalled = pipeline(3000, 100, idle_channel=True, sink_channel="idle")
    agent = Agent.from_properties(stalled, "a1", {})
    agent.start()
    try:
        wait(lambda: agent.channels["c1"].size == 3000, what="c1 to hold 3000 events")
        channel, source = agent.channels["c1"], agent.sources["r1"]
        moved = pipeline(3000, 100, capacity=20000, idle_channel=True)
        assert agent.reload(moved, {})
        assert agent.channels["c1"] is channel  # same name and type: same object, same events
        assert agent.channels["c1"].capacity == 20000  # new setting applied in place
        assert agent.sources["r1"] is source  # untouched: not restarted
        wait(
            lambda: agent.metrics()["SINK.k1"]["EventDrainSuccessCount"] == 3000,
            what="the kept events drained",
        )
        assert agent.reloads == 1
    finally:
        agent.stop()


def test_a_bad_reload_is_refused_and_the_agent_keeps_running(wait: Callable[..., None]) -> None:
    config = pipeline(10**9, 100)
    agent = Agent.from_properties(config, "a1", {})
    agent.start()
    try:
        before = agent.sources["r1"]
        assert not agent.reload(pipeline(10**9, 100, capacity="many"), {})
        assert agent.reload_failures == 1 and agent.sources["r1"] is before
        drained = agent.metrics()["SINK.k1"]["EventDrainSuccessCount"]
        wait(lambda: agent.metrics()["SINK.k1"]["EventDrainSuccessCount"] > drained, what="flow to go on")
    finally:
        agent.stop()


def test_the_file_watcher_reloads_on_a_content_change(tmp_path: Path) -> None:
    path = tmp_path / "agent.properties"
    config = pipeline(0, 100)
    path.write_text(config)
    agent = Agent.from_properties(config, "a1", {})
    agent.start()
    watcher = ConfigWatcher(agent, path, interval=0)
    try:
        path.write_text(config)  # touched, same content
        assert not watcher.check_now()
        path.write_text(config.replace("totalEvents = 0", "totalEvents = 5"))
        assert watcher.check_now()
        assert agent.reloads == 1
    finally:
        agent.stop()


def test_monitoring_serves_flume_json_and_prometheus_over_http(wait: Callable[..., None]) -> None:
    agent = Agent.from_properties(pipeline(300, 100), "a1", {})
    agent.start()
    monitor = MonitorServer(agent.metrics, "a1", "127.0.0.1", 0)
    monitor.start()
    try:
        wait(lambda: agent.metrics()["SINK.k1"]["EventDrainSuccessCount"] == 300, what="the flow")
        url = f"http://127.0.0.1:{monitor.port}/metrics"
        body = httpx.get(url, timeout=10).json()
        channel = body["CHANNEL.c1"]
        for name in (
            "ChannelSize",
            "ChannelCapacity",
            "ChannelFillPercentage",
            "EventPutAttemptCount",
            "EventPutSuccessCount",
            "EventTakeAttemptCount",
            "EventTakeSuccessCount",
        ):
            assert isinstance(channel[name], int | float), name
        assert channel["EventPutSuccessCount"] == 300 and channel["ChannelCapacity"] == 10000
        assert body["SOURCE.r1"]["EventAcceptedCount"] == 300
        assert body["SINK.k1"]["EventDrainSuccessCount"] == 300
        text = httpx.get(url, params={"format": "prometheus"}, timeout=10).text
        assert 'flume_event_put_success_count{type="CHANNEL",component="c1",agent="a1"} 300.0' in text
        assert "# TYPE flume_channel_size gauge" in text
        assert httpx.get(url, params={"format": "xml"}, timeout=10).status_code == 422
    finally:
        monitor.stop()
        agent.stop()


def test_the_agent_reports_its_counters_through_its_own_bookkeeper(wait: Callable[..., None]) -> None:
    agent = Agent.from_properties(pipeline(200, 100), "a1", {})
    agent.start()
    try:
        wait(lambda: agent.metrics()["SINK.k1"]["EventDrainSuccessCount"] == 200, what="the flow")
        reporter = SelfReporter(agent.metrics, "a1")
        reporter.publish()
        bk = reporter.bookkeeper
        assert bk.context == "artimon.agent"
        labels = {"type": "CHANNEL", "component": "c1", "agent": "a1"}
        assert bk.get_integer_var("flume.EventPutSuccessCount", labels) == 200
        assert bk.get_double_var("flume.ChannelFillPercentage", labels) == 0.0
    finally:
        agent.stop()


def test_a_new_central_version_reloads_the_agent(zk_hosts: str, wait: Callable[..., None]) -> None:
    from kazoo.client import KazooClient

    from bookkeeper import resolve_zk

    config = pipeline(0, 100)
    agent = Agent.from_properties(config, "a1", {})
    agent.start()
    follower = ConfigFollower(agent, zk_hosts)
    follower.start()
    connect, layout = resolve_zk(zk_hosts)
    client = KazooClient(hosts=connect)
    client.start(timeout=30)
    try:
        store = ConfigStore(client, layout, None)
        store.write(ConfigTarget("agent", "a1"), config.replace("totalEvents = 0", "totalEvents = 7"))
        wait(lambda: agent.reloads == 1, what="the reload from the central configuration")
        wait(
            lambda: agent.metrics()["SINK.k1"]["EventDrainSuccessCount"] == 7, what="the new source's events"
        )
    finally:
        client.stop()
        client.close()
        follower.stop()
        agent.stop()
