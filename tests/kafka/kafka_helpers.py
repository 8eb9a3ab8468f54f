"""Helpers of the Kafka tests: sample-batch events with known (series, time) pairs, draining
a channel, counting what arrived, reading a topic whole."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from artimon.servers import KafkaCluster
from bookkeeper import Bookkeeper
from bookkeeper.ground import decode_sample_batch, encode_sample_batch
from collector_agent import BasicChannel, ChannelProcessor, Context, Event, MemoryChannel, Status
from collector_agent.channels.kafka import KafkaChannel
from collector_agent.selectors.replicating import ReplicatingChannelSelector
from collector_agent.sinks.kafka import KafkaSink
from collector_agent.sources.kafka import KafkaSource


def sample_events(endpoints: int, rounds: int, variables: int = 3) -> list[Event]:
    """A round of ``variables`` integers per endpoint, ``rounds`` times, as the Artimon
    source makes them (body: a sample batch; headers: endpoint, round, agent)."""
    events = []
    for round_index in range(rounds):
        round_ms = 1_700_000_000_000 + round_index * 60_000
        for endpoint in range(endpoints):
            bk = Bookkeeper(f"app{endpoint}", environ={})
            for variable in range(variables):
                bk.integer("hits", var=str(variable)).set(round_index)
            batch = bk.snapshot()
            batch.timestamps[:] = round_ms
            headers = {
                "artimon.endpoint": f"10.0.0.{endpoint}:1:u{endpoint}",
                "artimon.round": str(round_ms),
                "artimon.agent": "a1",
            }
            events.append(Event(headers, encode_sample_batch(batch)))
    return events


def samples(events: Iterable[Event]) -> Counter[tuple[str, int]]:
    """Every (series, time) the events carry, with how often it came."""
    seen: Counter[tuple[str, int]] = Counter()
    for event in events:
        batch = decode_sample_batch(event.body)
        keys = batch.series_keys()
        seen.update(zip(keys, (int(t) for t in batch.timestamps), strict=True))
    return seen


def memory_channel(capacity: int = 100_000, **keys: str) -> MemoryChannel:
    channel = MemoryChannel("mem")
    keys.setdefault("transactionCapacity", str(min(1000, capacity)))
    channel.configure(Context({"capacity": str(capacity), **keys}))
    channel.start()
    return channel


def put(channel: BasicChannel, events: list[Event], batch: int = 100) -> None:
    for start in range(0, len(events), batch):
        with channel.transaction() as tx:
            tx.put_batch(events[start : start + batch])


def drain(channel: BasicChannel) -> list[Event]:
    out: list[Event] = []
    while True:
        with channel.transaction() as tx:
            taken = tx.take_batch(1000)
        if not taken:
            return out
        out.extend(taken)


def run_until(process: Callable[[], Status], done: Callable[[], bool], timeout: float, what: str) -> None:
    """Call ``process`` until ``done``; fail after ``timeout`` s naming ``what``."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        process()


def produce(bootstrap: str, topic: str, values: list[bytes], key: bytes | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value, key)
    assert producer.flush(30) == 0


def read_topic(bootstrap: str, topic: str, partitions: int = 4) -> list[tuple[int, int, bytes | None, bytes]]:
    """Every record of ``topic``: (partition, offset, key, value)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        assigned = [TopicPartition(topic, p, 0) for p in range(partitions)]
        consumer.assign(assigned)
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
        out: list[tuple[int, int, bytes | None, bytes]] = []
        deadline = time.monotonic() + 60
        total = sum(ends.values())
        while len(out) < total:
            assert time.monotonic() < deadline, f"read {len(out)} of {total} records"
            for message in consumer.consume(total - len(out), timeout=1):
                if message.error() is None:
                    out.append((message.partition(), message.offset(), message.key(), message.value()))
        return out
    finally:
        consumer.close()


def produce_events(bootstrap: str, topic: str, events: list[Event]) -> None:
    """``events`` as a plain record each (body as value, headers as record headers), keyed by
    endpoint, written by a producer that is not ours (librdkafka's own API)."""
    from collector_agent.kafka_records import record_from_event

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for event in events:
        value, headers = record_from_event(event, flume_format=False)
        producer.produce(topic, value, event.headers["artimon.endpoint"], headers=headers)
    assert producer.flush(30) == 0


def topic_samples(bootstrap: str, topic: str) -> Counter[tuple[str, int]]:
    """Every (series, time) in the plain records of ``topic``, with how often it came."""
    return samples(Event({}, value) for _p, _o, _k, value in read_topic(bootstrap, topic))


def topic_size(bootstrap: str, topic: str, partitions: int = 4) -> int:
    """Records in ``topic`` (the sum of its partitions' end offsets)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sizer"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        )
    finally:
        consumer.close()


def kafka_sink(kafka: KafkaCluster, topic: str, channel: BasicChannel, **keys: str) -> KafkaSink:
    sink = KafkaSink("k1")
    sink.configure(
        Context({"kafka.bootstrap.servers": kafka.bootstrap_servers, "kafka.topic": topic, **keys})
    )
    sink.channel = channel
    sink.start()
    return sink


def publish(kafka: KafkaCluster, topic: str, events: list[Event], **keys: str) -> KafkaSink:
    """``events`` through a Kafka sink onto ``topic``; the stopped sink."""
    inbound = memory_channel()
    put(inbound, events)
    sink = kafka_sink(kafka, topic, inbound, **keys)
    run_until(sink.process, lambda: inbound.size == 0, 60, "the sink to drain its channel")
    sink.stop()
    return sink


def kafka_source(
    kafka: KafkaCluster, topic: str, channel: BasicChannel, tmp_path: Path, name: str = "r1", **keys: str
) -> KafkaSource:
    source = KafkaSource(name)
    source.configure(
        Context(
            {
                "kafka.bootstrap.servers": kafka.bootstrap_servers,
                "kafka.topics": topic,
                "kafka.consumer.group.id": f"g-{topic}",
                "batchDurationMillis": "300",
                "deadLetter.dir": str(tmp_path / "dead"),
                **keys,
            }
        )
    )
    selector = ReplicatingChannelSelector()
    selector.configure(Context(), {"mem": channel})
    source.channel_processor = ChannelProcessor(selector)
    source.start()
    return source


def kafka_channel(kafka: KafkaCluster, topic: str, tmp_path: Path, **keys: str) -> KafkaChannel:
    """A started Kafka channel on ``topic`` (group ``g-<topic>``), ``keys`` added to its context."""
    channel = KafkaChannel("kc")
    channel.configure(
        Context(
            {
                "kafka.bootstrap.servers": kafka.bootstrap_servers,
                "kafka.topic": topic,
                "kafka.consumer.group.id": f"g-{topic}",
                "deadLetter.dir": str(tmp_path / "dead"),
                **keys,
            }
        )
    )
    channel.start()
    return channel
