"""The Kafka channel's asynchronous offset commits against a real broker: a crash with commits
in flight redelivers only what they covered and loses nothing; a rebalance waits for them and
commits nothing for the partitions it takes away."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from kafka_helpers import kafka_channel, put, sample_events

from artimon.servers import KafkaCluster
from collector_agent import Event
from collector_agent.channels.kafka import KafkaChannel

Key = tuple[str, str]
Wait = Callable[..., None]


def key(event: Event) -> Key:
    return event.headers["artimon.endpoint"], event.headers["artimon.round"]


def take_committed(channel: KafkaChannel, batch: int, out: list[Key]) -> int:
    """One take of ``batch`` events at most, committed; the number taken."""
    with channel.transaction() as tx:
        taken = tx.take_batch(batch)
    out.extend(key(e) for e in taken)
    return len(taken)


def drain_keys(channel: KafkaChannel, missing: set[Key], out: list[Key], timeout: float = 60) -> None:
    """Committed takes until ``out`` holds every key of ``missing``, then until a take is empty."""
    deadline = time.monotonic() + timeout
    while not missing <= set(out):
        assert time.monotonic() < deadline, f"{len(missing - set(out))} events never came"
        take_committed(channel, 100, out)
    while take_committed(channel, 100, out):
        pass


def committed_offsets(kafka: KafkaCluster, topic: str, group: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    try:
        wanted = [TopicPartition(topic, p) for p in range(4)]
        return [p.offset for p in consumer.committed(wanted, timeout=10)]
    finally:
        consumer.close()


def end_offsets(kafka: KafkaCluster, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "ends"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(4)]
    finally:
        consumer.close()


CRASHING_TAKER = """
import json, os, signal, sys
from collector_agent import Context
from collector_agent.channels.kafka import KafkaChannel

bootstrap, topic, group, dead = sys.argv[1:5]
channel = KafkaChannel("kc")
channel.configure(Context({
    "kafka.bootstrap.servers": bootstrap, "kafka.topic": topic, "kafka.consumer.group.id": group,
    "deadLetter.dir": dead, "kafka.consumer.session.timeout.ms": "6000",
}))
channel.start()
committed = 0
while committed < 150:
    with channel.transaction() as tx:
        taken = tx.take_batch(10)
    if taken:  # the transaction is committed: its events were delivered
        keys = [[e.headers["artimon.endpoint"], e.headers["artimon.round"]] for e in taken]
        print(json.dumps(keys), flush=True)
        committed += len(taken)
(taker,) = channel._takers.values()
print(json.dumps({"unacknowledged": taker.unacknowledged}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_crash_with_commits_in_flight_redelivers_only_their_events_and_loses_none(
    kafka: KafkaCluster, topic: str, tmp_path: Path
) -> None:
    events = sample_events(endpoints=40, rounds=6, variables=1)
    producer = kafka_channel(kafka, topic, tmp_path)
    put(producer, events)
    producer.stop()
    group = f"g-{topic}"
    child = subprocess.run(
        [sys.executable, "-c", CRASHING_TAKER, kafka.bootstrap_servers, topic, group, str(tmp_path / "dead")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9, child.stderr
    lines = [json.loads(line) for line in child.stdout.splitlines()]
    *batches, last = lines
    # killed with the last commits' answers unread (at most kafka.commitsInFlight, 8, of them)
    assert 1 <= last["unacknowledged"] <= 8
    before = [tuple(k) for batch in batches for k in batch]
    may_come_again = {tuple(k) for batch in batches[-8:] for k in batch}

    after: list[Key] = []
    survivor = kafka_channel(kafka, topic, tmp_path)
    drain_keys(survivor, {key(e) for e in events} - set(before), after)
    survivor.stop()
    assert set(before) | set(after) == {key(e) for e in events}  # nothing lost
    assert set(before) & set(after) <= may_come_again  # what came again: only the last commits'
    assert len(after) == len(set(after))


def test_a_rebalance_waits_for_commits_in_flight_and_commits_nothing_it_took_away(
    kafka: KafkaCluster, topic: str, tmp_path: Path, wait: Wait
) -> None:
    events = sample_events(endpoints=40, rounds=10, variables=1)
    first = kafka_channel(kafka, topic, tmp_path)
    put(first, events)
    committed_by_first: list[Key] = []
    for _ in range(5):  # asynchronous commits, some of them still unanswered at the rebalance
        while not take_committed(first, 20, committed_by_first):
            pass
    (first_taker,) = first._takers.values()
    second = kafka_channel(kafka, topic, tmp_path)
    taken_by_second: list[Key] = []
    ready = threading.Event()

    def take_in_second() -> None:  # another sink runner of the same group
        while not ready.is_set():
            take_committed(second, 20, taken_by_second)

    runner = threading.Thread(target=take_in_second)
    runner.start()
    open_take: list[Key] = []
    tx = first.transaction()
    tx.begin()
    try:
        deadline = time.monotonic() + 60
        while len(first_taker.consumer.assignment()) != 2:  # its half after the rebalance
            assert time.monotonic() < deadline, "no rebalance"
            open_take.extend(key(e) for e in tx.take_batch(1))
        moved = {0, 1, 2, 3} - {p.partition for p in first_taker.consumer.assignment()}
        ends = end_offsets(kafka, topic)
        wait(
            lambda: all(committed_offsets(kafka, topic, f"g-{topic}")[p] == ends[p] for p in moved),
            60,
            "the second runner to commit its half",
        )
        while taken := tx.take_batch(100):  # the first runner's own half, to its end
            open_take.extend(key(e) for e in taken)
    finally:
        ready.set()
        runner.join()
    tx.commit()  # after the second runner committed its half: must not set it back
    tx.close()
    second.stop()
    first.stop()

    assert set(committed_by_first) & set(taken_by_second) == set()  # its commits landed first
    assert set(committed_by_first) | set(taken_by_second) | set(open_take) == {key(e) for e in events}
    assert committed_offsets(kafka, topic, f"g-{topic}") == end_offsets(kafka, topic)
