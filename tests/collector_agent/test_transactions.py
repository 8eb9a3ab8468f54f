from __future__ import annotations

import threading
import time

import pytest

from collector_agent import (
    ChannelException,
    ChannelFullException,
    Context,
    Event,
    MemoryChannel,
    TransactionState,
    TransactionStateError,
)


def memory(**settings: str) -> MemoryChannel:
    channel = MemoryChannel("c1")
    channel.configure(Context({"keep-alive": "0", **settings}, "a1.channels.c1."))
    channel.start()
    return channel


def events(n: int, start: int = 0) -> list[Event]:
    return [Event({"n": str(i)}, str(i).encode()) for i in range(start, start + n)]


def drain(channel: MemoryChannel) -> list[bytes]:
    with channel.transaction() as tx:
        return [e.body for e in tx.take_batch(10_000)]


def test_flume_idiom_and_context_manager() -> None:
    channel = memory(capacity="10", transactionCapacity="10")
    tx = channel.transaction()
    tx.begin()
    tx.put(Event({}, b"a"))
    tx.commit()
    tx.close()
    assert tx.state is TransactionState.CLOSED
    with channel.transaction() as tx2:
        tx2.put_batch(events(2))
    assert drain(channel) == [b"a", b"0", b"1"]


@pytest.mark.parametrize(
    ("steps", "error"),
    [
        (["put"], "put on channel c1 in state NEW"),
        (["begin", "begin"], "begin on channel c1 in state OPEN"),
        (["begin", "close"], "close on channel c1 in state OPEN"),
        (["begin", "commit", "put"], "put on channel c1 in state COMPLETED"),
        (["begin", "commit", "commit"], "commit on channel c1 in state COMPLETED"),
        (["begin", "rollback", "take"], "take on channel c1 in state COMPLETED"),
        (["commit"], "commit on channel c1 in state NEW"),
        (["begin", "prepare", "put"], "put on channel c1 in state PREPARED"),
    ],
)
def test_misuse_raises_a_clear_error(steps: list[str], error: str) -> None:
    tx = memory().transaction()
    actions = {
        "begin": tx.begin,
        "commit": tx.commit,
        "rollback": tx.rollback,
        "close": tx.close,
        "prepare": tx.prepare,
        "put": lambda: tx.put(Event()),
        "take": tx.take,
    }
    for step in steps[:-1]:
        actions[step]()
    with pytest.raises(TransactionStateError, match=error):
        actions[steps[-1]]()


def test_one_transaction_per_thread_and_only_its_thread_may_use_it() -> None:
    channel = memory()
    tx = channel.transaction()
    assert channel.transaction() is tx  # until it is closed
    tx.begin()
    seen: list[object] = []

    def other() -> None:
        seen.append(channel.transaction())
        try:
            tx.put(Event())
        except TransactionStateError as exc:
            seen.append(exc)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen[0] is not tx
    assert "belongs to the thread" in str(seen[1])
    tx.rollback()
    tx.close()
    assert channel.transaction() is not tx


def test_rollback_puts_taken_events_back_at_the_head_in_order() -> None:
    channel = memory(capacity="100", transactionCapacity="100")
    with channel.transaction() as tx:
        tx.put_batch(events(10))
    tx = channel.transaction()
    tx.begin()
    taken = tx.take_batch(4)
    assert [e.body for e in taken] == [b"0", b"1", b"2", b"3"]
    tx.rollback()
    tx.close()
    assert drain(channel) == [str(i).encode() for i in range(10)]


def test_rollback_of_puts_frees_their_room() -> None:
    channel = memory(capacity="5", transactionCapacity="5")
    tx = channel.transaction()
    tx.begin()
    tx.put_batch(events(5))
    tx.rollback()
    tx.close()
    assert channel.size == 0
    with channel.transaction() as tx2:
        tx2.put_batch(events(5))
    assert channel.size == 5


def test_capacity_is_checked_at_put_and_counts_uncommitted_puts() -> None:
    channel = memory(capacity="3", transactionCapacity="3")
    with channel.transaction() as tx:
        tx.put_batch(events(2))
    tx = channel.transaction()
    tx.begin()
    tx.put(Event({}, b"x"))  # room for it: 2 committed + 1 uncommitted = 3
    with pytest.raises(ChannelFullException, match="channel c1 is full"):
        tx.put(Event({}, b"y"))
    tx.commit()
    tx.close()
    assert channel.size == 3


def test_transaction_capacity_bounds_a_transaction() -> None:
    channel = memory(capacity="100", transactionCapacity="2")
    with pytest.raises(ChannelException, match="transactionCapacity 2"), channel.transaction() as tx:
        tx.put_batch(events(3))
    assert channel.size == 0


def test_byte_capacity_is_checked_at_put() -> None:
    channel = memory(capacity="100", byteCapacity="100", byteCapacityBufferPercentage="0")
    with channel.transaction() as tx:
        tx.put(Event({}, b"x" * 60))
    with pytest.raises(ChannelFullException, match="60 of 100 bytes"), channel.transaction() as tx:
        tx.put(Event({}, b"y" * 60))


def test_a_full_channel_waits_keep_alive_then_gives_way_when_a_sink_takes() -> None:
    channel = memory(capacity="2", transactionCapacity="2")
    channel.configure(Context({"capacity": "2", "transactionCapacity": "2", "keep-alive": "10"}))
    with channel.transaction() as tx:
        tx.put_batch(events(2))
    put_done = threading.Event()

    def producer() -> None:
        with channel.transaction() as tx:
            tx.put(Event({}, b"late"))
        put_done.set()

    thread = threading.Thread(target=producer)
    thread.start()
    assert not put_done.wait(0.2)  # blocked: backpressure
    with channel.transaction() as tx:
        assert len(tx.take_batch(1)) == 1
    assert put_done.wait(5)
    thread.join()
    assert drain(channel) == [b"1", b"late"]


def test_keep_alive_expires_into_channel_full() -> None:
    channel = memory(capacity="1", transactionCapacity="1")
    channel.configure(Context({"capacity": "1", "transactionCapacity": "1", "keep-alive": "0.2"}))
    with channel.transaction() as tx:
        tx.put(Event())
    started = time.monotonic()
    with pytest.raises(ChannelFullException), channel.transaction() as tx:
        tx.put(Event())
    assert 0.15 < time.monotonic() - started < 5


def test_take_on_an_empty_channel_answers_at_once() -> None:
    channel = memory()
    with channel.transaction() as tx:
        assert tx.take() is None
        assert tx.take_batch(10) == []


def test_counters_use_flume_names() -> None:
    channel = memory(capacity="10", transactionCapacity="10")
    with channel.transaction() as tx:
        tx.put_batch(events(4))
    with channel.transaction() as tx:
        tx.take_batch(3)
    metrics = channel.metrics()
    assert metrics["EventPutAttemptCount"] == 4
    assert metrics["EventPutSuccessCount"] == 4
    assert metrics["EventTakeSuccessCount"] == 3
    assert metrics["ChannelSize"] == 1
    assert metrics["ChannelCapacity"] == 10
    assert metrics["ChannelFillPercentage"] == 10.0


def test_concurrent_producers_and_consumers_lose_and_duplicate_nothing() -> None:
    channel = memory(capacity="1000", transactionCapacity="100")
    channel.configure(Context({"capacity": "1000", "transactionCapacity": "100", "keep-alive": "30"}))
    received: list[bytes] = []
    lock = threading.Lock()
    stop = threading.Event()

    def producer(offset: int) -> None:
        for start in range(offset, offset + 5000, 50):
            with channel.transaction() as tx:
                tx.put_batch(events(50, start))

    def consumer() -> None:
        while not stop.is_set() or channel.size:
            with channel.transaction() as tx:
                got = tx.take_batch(100)
            with lock:
                received.extend(e.body for e in got)

    consumers = [threading.Thread(target=consumer) for _ in range(2)]
    producers = [threading.Thread(target=producer, args=(k * 5000,)) for k in range(3)]
    for t in consumers + producers:
        t.start()
    for t in producers:
        t.join()
    stop.set()
    for t in consumers:
        t.join()
    assert sorted(int(b) for b in received) == list(range(15000))
