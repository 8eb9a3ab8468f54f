"""The Kafka sink, source and channel against a real broker: every sample end to end,
foreign records, rebalances, rollbacks, settings that would weaken delivery."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from kafka_helpers import (
    drain,
    kafka_channel,
    kafka_sink,
    kafka_source,
    memory_channel,
    produce,
    publish,
    put,
    read_topic,
    run_until,
    sample_events,
    samples,
)

from artimon.servers import KafkaCluster
from collector_agent import ConfigurationError, Context, Event, Status
from collector_agent.channels.kafka import KafkaChannel
from collector_agent.kafka_records import record_from_event
from collector_agent.registry import resolve
from collector_agent.sinks.kafka import KafkaSink
from collector_agent.sources.kafka import KafkaSource


def test_sink_to_source_carries_every_sample_keyed_by_endpoint(
    kafka: KafkaCluster, topic: str, tmp_path: Path
) -> None:
    events = sample_events(endpoints=20, rounds=5)
    sink = publish(kafka, topic, events, batchSize="30")
    assert sink.counters.get("EventDrainSuccessCount") == len(events)

    records = read_topic(kafka.bootstrap_servers, topic)
    partitions_of: dict[bytes | None, set[int]] = {}
    for partition, _offset, key, _value in records:
        partitions_of.setdefault(key, set()).add(partition)
    assert len(partitions_of) == 20 and all(len(p) == 1 for p in partitions_of.values())

    outbound = memory_channel()
    source = kafka_source(kafka, topic, outbound, tmp_path)
    got: list[Event] = []
    run_until(
        lambda: (source.process(), got.extend(drain(outbound)))[0],
        lambda: len(got) >= len(events),
        60,
        "every event",
    )
    source.stop()
    assert samples(got) == samples(events)  # each (series, time) once, none missing
    rounds_by_endpoint: dict[str, list[int]] = {}
    for event in got:
        assert event.headers["topic"] == topic and event.headers["key"] == event.headers["artimon.endpoint"]
        rounds_by_endpoint.setdefault(event.headers["artimon.endpoint"], []).append(
            int(event.headers["artimon.round"])
        )
    assert all(rounds == sorted(rounds) for rounds in rounds_by_endpoint.values())  # in order per endpoint


def test_foreign_records_are_dead_letters_and_the_partition_keeps_flowing(
    kafka: KafkaCluster, topic: str, tmp_path: Path
) -> None:
    good = sample_events(endpoints=3, rounds=2)
    foreign = [os.urandom(200), json.dumps({"metric": "cpu", "value": 3}).encode(), b""]
    values = [record_from_event(e, flume_format=True)[0] for e in good[:3]] + foreign
    values += [record_from_event(e, flume_format=True)[0] for e in good[3:]]
    produce(kafka.bootstrap_servers, topic, values, key=b"one-partition")
    outbound = memory_channel()
    source = kafka_source(kafka, topic, outbound, tmp_path, useFlumeEventFormat="true", batchSize="2")
    got: list[Event] = []
    run_until(
        lambda: (source.process(), got.extend(drain(outbound)))[0],
        lambda: len(got) >= len(good),
        60,
        "the good events",
    )
    run_until(source.process, lambda: source.counters.get("DeadLetterCount") == 3, 10, "the dead letters")
    source.stop()
    assert samples(got) == samples(good)
    assert source.counters.get("ForeignRecordCount") == 3
    letters = [json.loads(line) for line in (tmp_path / "dead" / "r1.jsonl").read_text().splitlines()]
    assert len(letters) == 3
    # random bytes may even decode as an AvroFlumeEvent, with bytes left over: "not one"
    reasons = [letter["headers"]["reason"] for letter in letters]
    assert all(re.search(r"is not (an|one) AvroFlumeEvent", reason) for reason in reasons), reasons


def test_a_full_channel_rewinds_the_source_and_loses_nothing(
    kafka: KafkaCluster, topic: str, tmp_path: Path
) -> None:
    events = sample_events(endpoints=10, rounds=3)
    publish(kafka, topic, events, batchSize="100")
    small = memory_channel(capacity=12, **{"keep-alive": "0"})
    source = kafka_source(kafka, topic, small, tmp_path, batchSize="7")
    got: list[Event] = []

    def step() -> Status:
        status = source.process()  # a batch of 7 fits once, then the second is refused until drained
        if source.counters.get("ChannelWriteFail"):
            got.extend(drain(small))
        return status

    run_until(step, lambda: len(got) + small.size >= len(events), 60, "every event")
    got.extend(drain(small))
    source.stop()
    assert source.counters.get("ChannelWriteFail") > 0
    assert samples(got) == samples(events)


def test_a_rebalance_between_two_sources_loses_nothing(
    kafka: KafkaCluster, topic: str, tmp_path: Path
) -> None:
    events = sample_events(endpoints=40, rounds=20, variables=1)
    early, late = events[:400], events[400:]
    inbound = memory_channel()
    put(inbound, early)
    sink = kafka_sink(kafka, topic, inbound, batchSize="200")
    run_until(sink.process, lambda: inbound.size == 0, 60, "the sink")
    outbound = memory_channel()
    fast = {"batchSize": "20", "kafka.consumer.heartbeat.interval.ms": "200"}
    first = kafka_source(kafka, topic, outbound, tmp_path, name="r1", **fast)
    got: list[Event] = []
    run_until(
        lambda: (first.process(), got.extend(drain(outbound)))[0], lambda: len(got) >= 20, 30, "a first batch"
    )
    second = kafka_source(kafka, topic, outbound, tmp_path, name="r2", **fast)

    def both() -> Status:
        first.process()
        second.process()
        got.extend(drain(outbound))
        return Status.READY

    run_until(both, lambda: second.counters.get("RebalanceCount") >= 1, 30, "the second source's partitions")
    put(inbound, late)  # read by both members, across the rebalance
    run_until(sink.process, lambda: inbound.size == 0, 60, "the sink")
    sink.stop()
    run_until(both, lambda: len(samples(got)) >= len(samples(events)), 60, "every sample")
    first.stop()
    second.stop()
    assert first.counters.get("RebalanceCount") >= 2  # everything, then its half
    assert second.counters.get("EventAcceptedCount") > 0
    seen = samples(got)
    assert set(seen) == set(samples(events))
    # the batch being read was committed inside the revocation; records fetched in the same
    # call as the revocation may come again (one batch at most), invisible in the stores
    assert sum(seen.values()) - len(seen) <= 20


def test_kafka_channel_commits_takes_and_rollback_takes_again(
    kafka: KafkaCluster, topic: str, tmp_path: Path
) -> None:
    def channel() -> KafkaChannel:
        return kafka_channel(kafka, topic, tmp_path)

    events = sample_events(endpoints=5, rounds=4)
    kc = channel()
    put(kc, events, batch=7)
    assert kc.counters.get("EventPutSuccessCount") == len(events)

    def take_all() -> list[Event]:
        taken: list[Event] = []
        tx = kc.transaction()
        tx.begin()
        for _ in range(40):
            taken.extend(tx.take_batch(100))
            if len(taken) >= len(events):
                break
        first = taken
        tx.rollback()
        tx.close()
        return first

    rolled_back = take_all()
    assert samples(rolled_back) == samples(events)
    produce(kafka.bootstrap_servers, topic, [b"\x00not an avro flume event"], key=b"x")
    got: list[Event] = []
    run_until(
        lambda: got.extend(drain(kc)) or Status.READY,
        lambda: kc.counters.get("DeadLetterCount") == 1,
        30,
        "all",
    )
    assert samples(got) == samples(events)  # taken again after the rollback, once
    assert kc.counters.get("ForeignRecordCount") == 1
    kc.stop()
    again = channel()  # the same group: everything was committed
    assert drain(again) == []
    assert again.size == 0
    again.stop()


def test_the_sink_writes_what_the_kafka_channel_reads_without_a_source(
    kafka: KafkaCluster, topic: str, tmp_path: Path
) -> None:
    events = sample_events(endpoints=4, rounds=2)
    sink = publish(kafka, topic, events, useFlumeEventFormat="true", flumeBatchSize="3")
    assert sink.batch_size == 3 and sink.counters.get("BatchCompleteCount") == len(events) // 3
    kc = KafkaChannel("kc")
    kc.configure(Context({"kafka.bootstrap.servers": kafka.bootstrap_servers, "kafka.topic": topic}))
    kc.start()
    got: list[Event] = []
    run_until(
        lambda: got.extend(drain(kc)) or Status.READY, lambda: len(got) >= len(events), 30, "the events"
    )
    kc.stop()
    assert samples(got) == samples(events)
    assert {e.headers["artimon.endpoint"] for e in got} == {e.headers["artimon.endpoint"] for e in events}


def test_settings_that_weaken_delivery_or_librdkafka_refuses_are_configuration_errors(
    kafka: KafkaCluster,
) -> None:
    base = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "kafka.topic": "t"}
    with pytest.raises(ConfigurationError, match=r"kafka\.producer\.acks: .1. would weaken delivery"):
        KafkaSink("k").configure(Context({**base, "kafka.producer.acks": "1"}, "a.sinks.k."))
    with pytest.raises(ConfigurationError, match=r"enable\.auto\.commit"):
        KafkaChannel("c").configure(Context({**base, "kafka.consumer.enable.auto.commit": "true"}))
    sink = KafkaSink("k")
    sink.configure(
        Context({**base, "kafka.producer.no.such.setting": "1", "kafka.producer.key.serializer": "x"})
    )
    with pytest.raises(ConfigurationError, match=r"no\.such\.setting"):
        sink.start()
    with pytest.raises(ConfigurationError, match=r"kafka\.topics"):
        KafkaSource("r").configure(Context({"kafka.bootstrap.servers": "x:1"}))
    assert resolve("sink", "org.apache.flume.sink.kafka.KafkaSink", "k") is KafkaSink
    assert resolve("source", "org.apache.flume.source.kafka.KafkaSource", "k") is KafkaSource
    assert resolve("channel", "org.apache.flume.channel.kafka.KafkaChannel", "k") is KafkaChannel
    assert resolve("channel", "kafka", "k") is KafkaChannel


def test_a_taker_thread_that_ended_leaves_the_group_when_another_takes(
    kafka: KafkaCluster, topic: str, tmp_path: Path
) -> None:
    import threading

    kc = KafkaChannel("kc")
    kc.configure(Context({"kafka.bootstrap.servers": kafka.bootstrap_servers, "kafka.topic": topic}))
    kc.start()
    put(kc, sample_events(endpoints=2, rounds=1))
    taken: list[Event] = []

    def take_both() -> None:  # a sink runner that a reload replaced
        run_until(lambda: taken.extend(drain(kc)) or Status.READY, lambda: len(taken) >= 2, 30, "both events")

    first = threading.Thread(target=take_both)
    first.start()
    first.join()
    assert len(taken) == 2
    assert len(kc._takers) == 1
    got = drain(kc)  # this thread's consumer: the ended thread's one is closed, not left holding partitions
    assert len(kc._takers) == 1 and threading.get_ident() in kc._takers
    kc.stop()
    assert got == []  # the first taker had committed everything
