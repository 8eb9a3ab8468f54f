"""The flume wall (Artimon's): the store side ten times slower than the inflow for ten
rounds. The polling side keeps every round on time and holds nothing, the lag lives in
Kafka, and once the store side is fast again it drains: every (series, round) in VHMS."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka_helpers import kafka_sink, kafka_source, memory_channel

from artimon.servers import KafkaCluster
from bookkeeper import Bookkeeper, SampleBatch
from bookkeeper.ground import encode_sample_batch
from collector_agent import Context, Event, Status
from collector_agent.sinks.vhms import VhmsSink
from vhms.server import Store, VhmsService

ENDPOINTS, VARIABLES, ROUNDS, PERIOD_S = 20, 50, 10, 0.5


def of_context(batch: SampleBatch, context: str) -> SampleBatch:
    """``batch`` as another context's (its series differ by the ``context`` label)."""
    return dataclasses.replace(
        batch, context=context, common_labels={**batch.common_labels, "context": context}
    )


def round_events(round_ms: int) -> list[Event]:
    bk = Bookkeeper("wall", environ={})
    for n in range(VARIABLES):
        bk.integer("wall.counter", n=str(n)).set(n)
    template = bk.snapshot()
    template.timestamps[:] = round_ms
    return [
        Event(
            {"artimon.endpoint": f"10.2.0.{e}:9000:u{e}", "artimon.round": str(round_ms)},
            encode_sample_batch(of_context(template, f"app{e}")),
        )
        for e in range(ENDPOINTS)
    ]


def pump(process: Callable[[], Status], stop: threading.Event) -> threading.Thread:
    def run() -> None:
        while not stop.is_set():
            if process() is Status.BACKOFF:
                stop.wait(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def group_lag(kafka: KafkaCluster, topic: str, group: str) -> int:
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    try:
        partitions = [TopicPartition(topic, p) for p in range(4)]
        committed = consumer.committed(partitions, timeout=10)
        ends = [consumer.get_watermark_offsets(p, timeout=10)[1] for p in partitions]
        return sum(end - max(0, c.offset) for end, c in zip(ends, committed, strict=True))
    finally:
        consumer.close()


@pytest.mark.slow
def test_a_store_ten_times_slower_leaves_the_lag_in_kafka_and_loses_nothing(
    kafka: KafkaCluster, topic: str, tmp_path: Path, wait: Callable[..., None]
) -> None:
    service = VhmsService(Store(), shard="default")
    service.start(register=False)
    polled, to_store = memory_channel(1000), memory_channel(40, **{"keep-alive": "0"})
    publish = kafka_sink(kafka, topic, polled, batchSize="100")
    consume = kafka_source(kafka, topic, to_store, tmp_path, batchSize="20", batchDurationMillis="100")
    store = VhmsSink("store")
    inflow = ENDPOINTS / PERIOD_S
    store.configure(
        Context(
            {
                "servers": f"default@127.0.0.1:{service.port}",
                "batchSize": "10",
                "maxEventsPerSecond": str(inflow / 10),  # the wall: a tenth of the inflow
                "deadLetter.dir": str(tmp_path / "dead"),
            }
        )
    )
    store.channel = to_store
    store.start()
    stop = threading.Event()
    threads = [pump(c.process, stop) for c in (publish, consume, store)]
    first_ms = (int(time.time() * 1000) // 60_000 - ROUNDS) * 60_000
    late_rounds, held = 0, []
    try:
        for index in range(ROUNDS):  # one round per period, committed as the Artimon source does
            due = time.monotonic() + PERIOD_S
            held.append(polled.size)
            started = time.monotonic()
            with polled.transaction() as tx:
                tx.put_batch(round_events(first_ms + index * 60_000))
            late_rounds += time.monotonic() - started > 0.1
            time.sleep(max(0.0, due - time.monotonic()))  # the next round's start, on the clock
        lag = group_lag(kafka, topic, f"g-{topic}")
        assert late_rounds == 0
        assert max(held) <= ENDPOINTS  # the polling side never held more than the round in flight
        assert lag >= ROUNDS * ENDPOINTS // 2  # most rounds wait in Kafka, not in an agent
        assert to_store.size <= 40
        store.max_rate = 0.0  # the wall is gone: the backlog drains
        total = ENDPOINTS * VARIABLES * ROUNDS
        wait(lambda: store.counters.get("SamplesStoredCount") >= total, 60, "the backlog to drain")
        wait(lambda: group_lag(kafka, topic, f"g-{topic}") == 0, 30, "the lag to reach 0")
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        for component in (publish, consume, store):
            component.stop()
    fetched = service.store.fetch("wall.counter", first_ms, first_ms + ROUNDS * 60_000, resolution=60)
    service.stop()
    assert fetched.values.shape == (ENDPOINTS * VARIABLES, ROUNDS)
    assert not np.isnan(fetched.values).any()  # every (series, round), none missing
    print(f"flume wall: Kafka lag peaked at {lag} events; the polling side held at most {max(held)}")
