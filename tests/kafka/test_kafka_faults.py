"""Faults with the real broker: kill -9 of the broker (one node), one node down of three
(replication 3, min.insync.replicas 2), kill -9 of an agent between two topics. Every sample
is counted end to end: each (series, time) sent must arrive, and nothing else."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka_helpers import produce_events, put, sample_events, samples, topic_samples, topic_size

from artimon.servers import KafkaCluster
from artimon.testing import start_agent_process
from collector_agent import Context, EventDeliveryException, MemoryChannel, Status
from collector_agent.sinks.kafka import KafkaSink

Wait = Callable[..., None]


def _run_sink(sink: KafkaSink, stop: threading.Event, failures: list[str]) -> None:
    """The sink's runner, as an agent has it: process, back off after a failure."""
    while not stop.is_set():
        try:
            if sink.process() is Status.BACKOFF:
                stop.wait(0.02)  # an empty channel: the runner's backoff
        except EventDeliveryException as exc:
            failures.append(str(exc))
            stop.wait(0.1)


def flow_with_a_fault(cluster: KafkaCluster, topic: str, fault: Callable[[], None], wait: Wait) -> list[str]:
    """300 events through a Kafka sink running in a thread; ``fault`` once a first part is on
    the topic; then every sample must be on the topic. Returns the sink's failures."""
    events = sample_events(endpoints=30, rounds=10, variables=2)
    channel = MemoryChannel("mem")
    channel.configure(Context({"capacity": "10000", "transactionCapacity": "1000"}))
    channel.start()
    sink = KafkaSink("k1")
    keys = {"kafka.bootstrap.servers": cluster.bootstrap_servers, "kafka.topic": topic, "batchSize": "20"}
    sink.configure(Context({**keys, "maxEventsPerSecond": "100"}))  # three seconds: the fault lands mid-flow
    sink.channel = channel
    sink.start()
    stop = threading.Event()
    failures: list[str] = []
    thread = threading.Thread(target=_run_sink, args=(sink, stop, failures), daemon=True)
    thread.start()
    try:
        put(channel, events)
        wait(lambda: sink.counters.get("EventDrainSuccessCount") >= 60, 30, "a first part on the topic")
        fault()
        assert sink.counters.get("EventDrainSuccessCount") < len(events), "the fault came after the flow"
        wait(lambda: sink.counters.get("EventDrainSuccessCount") >= len(events), 120, "the rest on the topic")
    finally:
        stop.set()
        thread.join(30)
        sink.stop()
    assert channel.size == 0
    assert set(topic_samples(cluster.bootstrap_servers, topic)) == set(samples(events))
    return failures


@pytest.mark.slow
def test_broker_kill_9_and_restart_loses_nothing(kafka: KafkaCluster, topic: str, wait: Wait) -> None:
    def kill_and_restart() -> None:
        pid = kafka.kill(0)
        assert not kafka.answers(0, timeout=0.5)
        time.sleep(1.0)  # the broker stays down a while: producers wait and retry meanwhile
        kafka.start_node(0)  # on the same data and port
        assert kafka.pid(0) not in (None, pid)

    flow_with_a_fault(kafka, topic, kill_and_restart, wait)


@pytest.mark.slow
def test_one_broker_of_three_down_is_invisible_to_the_sink(tmp_path: Path, wait: Wait) -> None:
    started = time.monotonic()
    with KafkaCluster(tmp_path / "kafka3", brokers=3, heap="256m") as cluster:
        print(f"three nodes ready in {cluster.started_in_s:.1f} s")
        topic = f"t-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(topic, 4)  # replication 3, min.insync.replicas 2 (the cluster's defaults)
        failures = flow_with_a_fault(cluster, topic, lambda: cluster.kill(1) and None, wait)
        assert failures == []  # no batch failed: the two in-sync replicas acknowledged every one
    print(f"three-node fault test: {time.monotonic() - started:.1f} s")


RELAY = """
r.sources = in
r.channels = fc
r.sinks = out
r.sources.in.type = org.apache.flume.source.kafka.KafkaSource
r.sources.in.channels = fc
r.sources.in.kafka.bootstrap.servers = {bootstrap}
r.sources.in.kafka.topics = {upstream}
r.sources.in.kafka.consumer.group.id = relay
r.sources.in.kafka.consumer.session.timeout.ms = 6000
r.sources.in.kafka.consumer.heartbeat.interval.ms = 1000
r.sources.in.batchSize = 20
r.sources.in.batchDurationMillis = 200
r.sources.in.deadLetter.dir = {data}/dead
r.channels.fc.type = file
r.channels.fc.dataDirs = {data}/channel
r.channels.fc.minimumRequiredSpace = 1048576
r.channels.fc.transactionCapacity = 1000
r.sinks.out.type = org.apache.flume.sink.kafka.KafkaSink
r.sinks.out.channel = fc
r.sinks.out.kafka.bootstrap.servers = {bootstrap}
r.sinks.out.kafka.topic = {downstream}
r.sinks.out.batchSize = 20
r.sinks.out.maxEventsPerSecond = 200
r.sinks.out.maxBackoffSleep = 200
"""


@pytest.mark.slow
def test_an_agent_between_two_topics_killed_mid_flow_loses_nothing(
    kafka: KafkaCluster, tmp_path: Path, wait: Wait
) -> None:
    upstream, downstream = f"up-{uuid.uuid4().hex[:8]}", f"down-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(upstream, 4)
    kafka.create_topic(downstream, 4)
    events = sample_events(endpoints=40, rounds=10, variables=1)
    produce_events(kafka.bootstrap_servers, upstream, events)
    config = tmp_path / "relay.properties"
    config.write_text(
        RELAY.format(
            bootstrap=kafka.bootstrap_servers, upstream=upstream, downstream=downstream, data=tmp_path
        )
    )
    agent = start_agent_process(config, "r")
    try:
        for landed in (80, 240):  # kill -9 twice mid-flow: between a take and its commit, somewhere
            wait(
                lambda n=landed: topic_size(kafka.bootstrap_servers, downstream) >= n, 60, f"{landed} records"
            )
            os.kill(agent.pid, signal.SIGKILL)
            agent.wait()
            agent.stdout.close()  # type: ignore[union-attr]
            assert topic_size(kafka.bootstrap_servers, downstream) < len(events), "killed after the flow"
            agent = start_agent_process(config, "r")
        expected = set(samples(events))
        wait(lambda: set(topic_samples(kafka.bootstrap_servers, downstream)) >= expected, 120, "every sample")
    finally:
        agent.kill()
        agent.wait()
        agent.stdout.close()  # type: ignore[union-attr]
    assert set(topic_samples(kafka.bootstrap_servers, downstream)) == expected
