from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest

from collector_agent import (
    BatchSink,
    Context,
    Event,
    EventDeliveryException,
    MalformedEventError,
    MemoryChannel,
    Status,
)
from collector_agent.runners import Runner
from collector_agent.sink_processors.default import DefaultSinkProcessor
from collector_agent.sink_processors.failover import FailoverSinkProcessor
from collector_agent.sink_processors.load_balance import LoadBalancingSinkProcessor


class RecordingSink(BatchSink):
    """A destination under the test's control: it records, fails, or refuses events."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.delivered: list[bytes] = []
        self.down = False
        self.refuse: set[bytes] = set()

    def deliver(self, events: list[Event]) -> None:
        if self.down:
            raise ConnectionError(f"{self.name} is down")
        bad = [i for i, e in enumerate(events) if e.body in self.refuse]
        if bad:
            raise MalformedEventError("refused", bad)
        self.delivered.extend(e.body for e in events)


def channel_with(n: int) -> MemoryChannel:
    channel = MemoryChannel("c")
    channel.configure(Context({"capacity": "1000", "transactionCapacity": "100"}))
    channel.start()
    with channel.transaction() as tx:
        tx.put_batch([Event({}, str(i).encode()) for i in range(n)])
    return channel


def sinks(channel: MemoryChannel, *names: str, batch: int = 1, **extra: str) -> list[RecordingSink]:
    made = []
    for name in names:
        sink = RecordingSink(name)
        sink.configure(Context({"batchSize": str(batch), **extra}))
        sink.channel = channel
        made.append(sink)
    return made


def test_default_processor_runs_its_sink_and_backs_off_when_empty() -> None:
    channel = channel_with(2)
    (sink,) = sinks(channel, "k1", batch=5)
    processor = DefaultSinkProcessor()
    processor.configure(Context({}), [sink])
    assert processor.process() is Status.READY
    assert processor.process() is Status.BACKOFF
    assert sink.delivered == [b"0", b"1"]
    assert sink.metrics()["BatchUnderflowCount"] == 1 and sink.metrics()["BatchEmptyCount"] == 1


def test_a_failed_delivery_leaves_the_events_in_the_channel() -> None:
    channel = channel_with(3)
    (sink,) = sinks(channel, "k1", batch=3)
    sink.down = True
    with pytest.raises(EventDeliveryException, match="k1 is down"):
        sink.process()
    assert channel.size == 3
    sink.down = False
    assert sink.process() is Status.READY
    assert sink.delivered == [b"0", b"1", b"2"]


def test_failover_uses_the_highest_priority_and_penalizes_failures() -> None:
    channel = channel_with(10)
    low, high = sinks(channel, "low", "high")
    processor = FailoverSinkProcessor()
    processor.configure(
        Context({"priority.low": "5", "priority.high": "10", "maxpenalty": "1500"}), [low, high]
    )
    processor.process()
    assert high.delivered == [b"0"] and low.delivered == []
    high.down = True
    processor.process()  # high fails, low takes the same event
    assert low.delivered == [b"1"]
    assert processor.active is low  # high sits out its penalty (2 s capped to 1.5 s)
    high.down = False
    processor.process()
    assert low.delivered == [b"1", b"2"]
    deadline = time.monotonic() + 5
    while processor.active is not high:
        assert time.monotonic() < deadline, "penalty did not expire"
        time.sleep(0.05)
    processor.process()
    assert high.delivered == [b"0", b"3"]


def test_failover_with_every_sink_down_raises_and_loses_nothing() -> None:
    channel = channel_with(1)
    a, b = sinks(channel, "a", "b")
    a.down = b.down = True
    processor = FailoverSinkProcessor()
    processor.configure(Context({}), [a, b])
    with pytest.raises(EventDeliveryException, match="nothing left to failover to"):
        processor.process()
    assert channel.size == 1


def test_failover_refuses_duplicate_priorities() -> None:
    a, b = sinks(channel_with(0), "a", "b")
    with pytest.raises(ValueError, match="priority 1 is already taken"):
        FailoverSinkProcessor().configure(Context({"priority.a": "1", "priority.b": "1"}, "g."), [a, b])


def test_round_robin_alternates_and_skips_a_failing_sink() -> None:
    channel = channel_with(6)
    a, b = sinks(channel, "a", "b")
    processor = LoadBalancingSinkProcessor()
    processor.configure(Context({}), [a, b])
    for _ in range(4):
        processor.process()
    assert a.delivered == [b"0", b"2"] and b.delivered == [b"1", b"3"]
    a.down = True
    processor.process()
    processor.process()
    assert b.delivered == [b"1", b"3", b"4", b"5"]


def test_random_selector_spreads_the_work() -> None:
    channel = channel_with(100)
    a, b = sinks(channel, "a", "b")
    processor = LoadBalancingSinkProcessor()
    processor.configure(Context({"selector": "random"}), [a, b])
    for _ in range(100):
        processor.process()
    assert len(a.delivered) + len(b.delivered) == 100
    assert 20 < len(a.delivered) < 80


def test_backoff_excludes_a_failed_sink_for_a_while() -> None:
    channel = channel_with(10)
    a, b = sinks(channel, "a", "b")
    processor = LoadBalancingSinkProcessor()
    processor.configure(Context({"backoff": "true", "selector.maxTimeOut": "60000"}), [a, b])
    a.down = True
    for _ in range(4):
        processor.process()
    a.down = False
    for _ in range(4):
        processor.process()
    assert a.delivered == []  # still excluded: 2 s after its first failure
    assert len(b.delivered) == 8


def test_load_balance_needs_two_sinks_and_a_known_selector() -> None:
    (a,) = sinks(channel_with(0), "a")
    with pytest.raises(ValueError, match="at least 2 sinks"):
        LoadBalancingSinkProcessor().configure(Context({}, "g."), [a])
    a, b = sinks(channel_with(0), "a", "b")
    with pytest.raises(ValueError, match="neither round_robin nor random"):
        LoadBalancingSinkProcessor().configure(Context({"selector": "fastest"}, "g."), [a, b])


def test_a_poison_event_goes_to_the_dead_letter_file_after_max_attempts(tmp_path: Path) -> None:
    channel = channel_with(3)
    (sink,) = sinks(
        channel, "k1", batch=3, **{"deadLetter.dir": str(tmp_path), "deadLetter.maxAttempts": "2"}
    )
    sink.refuse = {b"1"}
    assert sink.process() is Status.BACKOFF  # strike 1
    assert sink.process() is Status.BACKOFF  # strike 2
    assert channel.size == 3
    assert sink.process() is Status.READY  # diverted, the rest delivered
    assert sink.delivered == [b"0", b"2"]
    assert channel.size == 0
    (line,) = (tmp_path / "k1.jsonl").read_text().splitlines()
    letter = json.loads(line)
    assert letter["sink"] == "k1" and letter["body_base64"] == "MQ=="
    assert sink.metrics()["DeadLetterCount"] == 1


def test_max_events_per_second_paces_deliveries_and_stopping_does_not_wait_for_the_pace() -> None:
    channel = channel_with(6)
    (sink,) = sinks(channel, "k1", batch=2, maxEventsPerSecond="20")
    times: list[float] = []
    original = sink.deliver

    def timed(events: list[Event]) -> None:
        times.append(time.monotonic())
        original(events)

    sink.deliver = timed  # type: ignore[method-assign]
    sink.start()
    runner = Runner("k1", sink.process)
    runner.start()
    deadline = time.monotonic() + 30
    while len(sink.delivered) < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sink.delivered == [str(i).encode() for i in range(6)]
    assert all(later - earlier >= 2 / 20 - 0.005 for earlier, later in itertools.pairwise(times))
    sink.max_rate = 0.01  # after the next batch, the one after may come in 200 s
    with channel.transaction() as tx:
        tx.put_batch([Event({}, b"x")] * 2)
    while len(sink.delivered) < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(sink.delivered) == 8
    stopping = time.monotonic()
    runner.stop()
    sink.stop()
    assert not runner.alive and time.monotonic() - stopping < 5
