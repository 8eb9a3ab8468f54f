"""Kafka as the buffer: the Kafka channel against the file channel, the Kafka sink -> topic ->
Kafka source path, and one poll round of 1,000 endpoints x 1,500 variables through Kafka
into VHMS, on a real single-node broker (KRaft, Apache's jars) started here. Prints a table,
writes results/kafka_bench.json.

Targets (issue 19): the Kafka channel at least 50% of the file channel's events/s at
batches of 1,000; the round (1.5M samples) in VHMS within 10 s of being committed in the
polling agent's channel on this 2-core machine (moonshot 5 s).

- channels: put+commit then take+commit of ``--events`` events of 1 KiB, batches of 1,000,
  side by side on the same machine in one run (the file channel on ``--dir``).
- sink -> source: those events from a memory channel through a Kafka sink (batches of
  1,000), the topic and a Kafka source (batches of 1,000) into a memory channel, each side
  in its thread; events/s from the first take to the last put.
- rounds: 1,000 sample batches of 1,500 integers (one per endpoint, each with its own
  series, as the Artimon source makes them) put into the polling side's channel, then Kafka
  sink -> topic -> Kafka source -> memory channel -> vhms sink -> a VHMS shard in this
  process; seconds until VHMS stored all 1.5M samples; twice, a minute of data apart: the
  first round creates the series, the second is what every later round costs.

- flume wall: ten rounds of a tenth of the endpoints, one every 2 s, while the store side
  (``vhms`` sink paced by ``maxEventsPerSecond``) takes a tenth of the inflow, then at full
  speed: Kafka's lag at its peak, the polling side's largest backlog, late rounds (a commit
  slower than a tenth of the period), and the time the backlog took to drain.

Run: python benchmarks/kafka_bench.py [--quick] [--events N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _report import progress, report
from confluent_kafka import Consumer, TopicPartition

from artimon.servers import KafkaCluster
from bookkeeper import Bookkeeper
from bookkeeper.ground import encode_sample_batch
from collector_agent import ChannelProcessor, Context, Event, Status
from collector_agent.channels.base import BasicChannel
from collector_agent.channels.file.channel import FileChannel
from collector_agent.channels.kafka import KafkaChannel
from collector_agent.channels.memory import MemoryChannel
from collector_agent.selectors.replicating import ReplicatingChannelSelector
from collector_agent.sinks.kafka import KafkaSink
from collector_agent.sinks.vhms import VhmsSink
from collector_agent.sources.kafka import KafkaSource
from vhms.server import Store, VhmsService

BATCH = 1_000
BODY = 1024
CHANNEL_RATIO_TARGET = 0.5
ROUND_TARGET_S, ROUND_MOONSHOT_S = 10.0, 5.0


def memory_channel(capacity: int) -> MemoryChannel:
    channel = MemoryChannel("mem")
    channel.configure(
        Context(
            {
                "capacity": str(capacity),
                "transactionCapacity": str(min(capacity, BATCH)),
                "byteCapacity": "0",
                "keep-alive": "0",
            }
        )
    )
    channel.start()
    return channel


def put_take(channel: BasicChannel, events: list[Event]) -> tuple[float, float]:
    """Seconds to put ``events`` (a transaction per batch), then to take them all back."""
    started = time.perf_counter()
    for start in range(0, len(events), BATCH):
        with channel.transaction() as tx:
            tx.put_batch(events[start : start + BATCH])
    put_s = time.perf_counter() - started
    started = time.perf_counter()
    taken = 0
    while taken < len(events):
        with channel.transaction() as tx:
            taken += len(tx.take_batch(BATCH))
    return put_s, time.perf_counter() - started


def pump(process: Callable[[], Status], stop: threading.Event) -> threading.Thread:
    """Call ``process`` in a thread until ``stop``, as a runner does (a short backoff)."""

    def run() -> None:
        while not stop.is_set():
            if process() is Status.BACKOFF:
                stop.wait(0.005)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def kafka_pipeline(
    cluster: KafkaCluster,
    topic: str,
    inbound: BasicChannel,
    outbound: BasicChannel,
    data: Path,
    source_batch: int = BATCH,
) -> tuple[KafkaSink, KafkaSource]:
    common = {"kafka.bootstrap.servers": cluster.bootstrap_servers}
    sink = KafkaSink("publish")
    sink.configure(Context({**common, "kafka.topic": topic, "batchSize": str(BATCH)}))
    sink.channel = inbound
    source = KafkaSource("consume")
    source.configure(
        Context(
            {
                **common,
                "kafka.topics": topic,
                "kafka.consumer.group.id": f"bench-{topic}",
                "batchSize": str(source_batch),
                "batchDurationMillis": "100",
                "deadLetter.dir": str(data / "dead"),
            }
        )
    )
    selector = ReplicatingChannelSelector()
    selector.configure(Context(), {"out": outbound})
    source.channel_processor = ChannelProcessor(selector)
    return sink, source


def channels(cluster: KafkaCluster, data: Path, count: int) -> list[dict[str, Any]]:
    events = [
        Event({"artimon.endpoint": f"10.0.{i % 250}.{i % 7}:1:u"}, os.urandom(BODY)) for i in range(count)
    ]
    megabytes = count * BODY / 1e6
    rows = []
    file = FileChannel("bench-file")
    file.configure(
        Context(
            {
                "dataDirs": str(data / "file"),
                "capacity": str(count),
                "transactionCapacity": str(BATCH),
                "minimumRequiredSpace": str(2**20),
            }
        )
    )
    file.start()
    kafka = KafkaChannel("bench-kafka")
    kafka.configure(
        Context(
            {
                "kafka.bootstrap.servers": cluster.bootstrap_servers,
                "kafka.topic": f"bench-{uuid.uuid4().hex[:8]}",
                "transactionCapacity": str(BATCH),
                "deadLetter.dir": str(data / "dead"),
            }
        )
    )
    kafka.start()
    for name, channel in (("file channel", file), ("kafka channel", kafka)):
        progress(f"{name}: {count} events of {BODY} B")
        put_s, take_s = put_take(channel, events)
        channel.stop()
        for what, seconds in (("put+commit", put_s), ("take+commit", take_s)):
            rows.append(
                {
                    "case": f"{name} {what}",
                    "events": count,
                    "seconds": round(seconds, 2),
                    "events_per_s": round(count / seconds),
                    "MB_per_s": round(megabytes / seconds, 1),
                }
            )
    for what in ("put+commit", "take+commit"):
        file_rate = next(r["events_per_s"] for r in rows if r["case"] == f"file channel {what}")
        kafka_row = next(r for r in rows if r["case"] == f"kafka channel {what}")
        kafka_row["vs_file"] = round(kafka_row["events_per_s"] / file_rate, 2)
        kafka_row["target"] = f">= {CHANNEL_RATIO_TARGET}"
    return rows


def sink_to_source(cluster: KafkaCluster, data: Path, count: int) -> dict[str, Any]:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 4)
    events = [
        Event({"artimon.endpoint": f"10.0.{i % 250}.{i % 7}:1:u"}, os.urandom(BODY)) for i in range(count)
    ]
    inbound, outbound = memory_channel(count), memory_channel(count)
    for start in range(0, count, BATCH):
        with inbound.transaction() as tx:
            tx.put_batch(events[start : start + BATCH])
    sink, source = kafka_pipeline(cluster, topic, inbound, outbound, data)
    source.start()
    sink.start()
    progress(f"sink -> source: {count} events of {BODY} B")
    stop = threading.Event()
    started = time.perf_counter()
    threads = [pump(sink.process, stop), pump(source.process, stop)]
    while outbound.size < count:
        time.sleep(0.01)  # a benchmark's poll of a counter
    seconds = time.perf_counter() - started
    stop.set()
    for thread in threads:
        thread.join()
    sink.stop()
    source.stop()
    return {
        "case": "kafka sink -> topic -> kafka source",
        "events": count,
        "seconds": round(seconds, 2),
        "events_per_s": round(count / seconds),
        "MB_per_s": round(count * BODY / 1e6 / seconds, 1),
    }


def round_events(endpoints: int, variables: int, round_ms: int) -> list[Event]:
    """One round: a sample batch of ``variables`` integers per endpoint, stamped ``round_ms``."""
    bk = Bookkeeper("bench", environ={})
    for n in range(variables):
        bk.integer("bench.counter", n=str(n)).set(n)
    template = bk.snapshot()
    template.timestamps[:] = round_ms
    events = []
    for endpoint in range(endpoints):
        context = f"app{endpoint}"  # a label of every series: each endpoint has its own series
        batch = dataclasses.replace(
            template, context=context, common_labels={**template.common_labels, "context": context}
        )
        headers = {
            "artimon.endpoint": f"10.1.{endpoint // 250}.{endpoint % 250}:9000:u{endpoint}",
            "artimon.round": str(round_ms),
            "artimon.agent": "bench",
        }
        events.append(Event(headers, encode_sample_batch(batch)))
    return events


def rounds(cluster: KafkaCluster, data: Path, endpoints: int, variables: int) -> list[dict[str, Any]]:
    """Two rounds a minute apart through the same agents and store: the first creates the
    1.5M series in VHMS, the second is every round after it."""
    progress(f"rounds: {endpoints} endpoints x {variables} variables")
    total = endpoints * variables
    topic = f"round-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 4)
    service = VhmsService(Store(), shard="default")
    service.start(register=False)
    inbound, middle = memory_channel(max(endpoints, BATCH)), memory_channel(max(endpoints, BATCH))
    sink, source = kafka_pipeline(cluster, topic, inbound, middle, data)
    store_sink = VhmsSink("store")
    store_sink.configure(
        Context(
            {
                "servers": f"default@127.0.0.1:{service.port}",
                "batchSize": "100",
                "deadLetter.dir": str(data / "dead"),
            }
        )
    )
    store_sink.channel = middle
    for component in (source, sink, store_sink):
        component.start()
    stop = threading.Event()
    threads = [pump(c.process, stop) for c in (sink, source, store_sink)]
    rows = []
    first_ms = (int(time.time() * 1000) // 60_000 - 2) * 60_000
    for index, name in enumerate(("first (its series new to VHMS)", "second")):
        events = round_events(endpoints, variables, first_ms + index * 60_000)
        cpu = time.process_time()
        started = time.perf_counter()
        for start in range(0, endpoints, BATCH):  # what the polling agent commits at the round's end
            with inbound.transaction() as tx:
                tx.put_batch(events[start : start + BATCH])
        while store_sink.counters.get("SamplesStoredCount") < total * (index + 1):
            time.sleep(0.01)  # a benchmark's poll of a counter
        seconds = time.perf_counter() - started
        rows.append(
            {
                "case": f"round {endpoints} x {variables} through Kafka into VHMS: {name}",
                "events": endpoints,
                "samples": total,
                "seconds": round(seconds, 2),
                "cpu_s": round(time.process_time() - cpu, 1),
                "MB_per_s": round(sum(len(e.body) for e in events) / 1e6 / seconds, 1),
                "target": f"<= {ROUND_TARGET_S:g} s (moonshot {ROUND_MOONSHOT_S:g})",
            }
        )
    stop.set()
    for thread in threads:
        thread.join()
    for component in (sink, source, store_sink):
        component.stop()
    service.stop()
    return rows


def group_lag(cluster: KafkaCluster, topic: str, group: str, partitions: int = 4) -> int:
    """Records of ``topic`` that ``group`` has not committed yet."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        committed = consumer.committed(wanted, timeout=10)
        ends = [consumer.get_watermark_offsets(p, timeout=10)[1] for p in wanted]
        return sum(end - max(0, c.offset) for end, c in zip(ends, committed, strict=True))
    finally:
        consumer.close()


def flume_wall(
    cluster: KafkaCluster, data: Path, endpoints: int, variables: int, period: float
) -> dict[str, Any]:
    """Ten rounds, one every ``period`` s, while the store side takes a tenth of the inflow;
    then the store side at full speed: the lag's peak in Kafka, the polling side's largest
    backlog, the late rounds, the drain time."""
    progress(f"flume wall: {endpoints} endpoints x {variables} variables every {period:g} s, store at 1/10")
    topic = f"wall-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 4)
    service = VhmsService(Store(), shard="default")
    service.start(register=False)
    # the store agent holds one round at most: the rest of the backlog waits in Kafka
    polled, to_store = memory_channel(max(endpoints, BATCH)), memory_channel(endpoints)
    sink, source = kafka_pipeline(cluster, topic, polled, to_store, data, source_batch=max(1, endpoints // 2))
    store_sink = VhmsSink("store")
    store_sink.configure(
        Context(
            {
                "servers": f"default@127.0.0.1:{service.port}",
                "batchSize": "10",
                "maxEventsPerSecond": str(endpoints / period / 10),
                "deadLetter.dir": str(data / "dead"),
            }
        )
    )
    store_sink.channel = to_store
    for component in (source, sink, store_sink):
        component.start()
    stop = threading.Event()
    threads = [pump(c.process, stop) for c in (sink, source, store_sink)]
    first_ms = (int(time.time() * 1000) // 60_000 - 10) * 60_000
    backlog, late = 0, 0
    for index in range(10):
        due = time.monotonic() + period
        events = round_events(endpoints, variables, first_ms + index * 60_000)
        backlog = max(backlog, polled.size)
        started = time.monotonic()
        with polled.transaction() as tx:
            tx.put_batch(events)
        late += time.monotonic() - started > period / 10
        time.sleep(max(0.0, due - time.monotonic()))  # the next round's start, on the clock
    peak = group_lag(cluster, topic, f"bench-{topic}")
    drain_started = time.perf_counter()
    store_sink.max_rate = 0.0
    total = endpoints * variables * 10
    while store_sink.counters.get("SamplesStoredCount") < total:
        time.sleep(0.05)  # a benchmark's poll of a counter
    drain = time.perf_counter() - drain_started
    stop.set()
    for thread in threads:
        thread.join()
    for component in (sink, source, store_sink):
        component.stop()
    service.stop()
    return {
        "case": (
            f"flume wall, 10 rounds of {endpoints} x {variables}: Kafka lag peak {peak} events, "
            f"polling backlog at most {backlog}, {late} late rounds"
        ),
        "events": endpoints * 10,
        "samples": total,
        "seconds": round(drain, 2),
        "target": "drain time; no late round, no backlog",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--endpoints", type=int, default=1000)
    parser.add_argument("--variables", type=int, default=1500)
    parser.add_argument("--dir", type=Path, default=None, help="where the file channel and Kafka write")
    args = parser.parse_args()
    count = 20_000 if args.quick else args.events
    endpoints, variables = (100, 150) if args.quick else (args.endpoints, args.variables)
    data = Path(tempfile.mkdtemp(prefix="kafka-bench-", dir=args.dir))
    try:
        cluster = KafkaCluster(data / "kafka", heap="1g").start()
        progress(f"kafka ready in {cluster.started_in_s:.1f} s")
        try:
            rows = channels(cluster, data, count)
            rows.append(sink_to_source(cluster, data, count))
            rows.extend(rounds(cluster, data, endpoints, variables))
            rows.append(flume_wall(cluster, data, endpoints // 10, variables, 1.0 if args.quick else 2.0))
        finally:
            cluster.stop()
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        load = os.getloadavg()[0]
        rows.append({"case": f"peak RSS of this process {rss_mb:.0f} MB, load average {load:.1f}"})
    finally:
        shutil.rmtree(data, ignore_errors=True)
    columns = [
        "case",
        "events",
        "samples",
        "seconds",
        "events_per_s",
        "MB_per_s",
        "cpu_s",
        "vs_file",
        "target",
    ]
    report("kafka_bench", rows, columns)


if __name__ == "__main__":
    main()
