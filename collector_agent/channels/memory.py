"""The ``memory`` channel: fast, bounded, not durable (a crash loses what it holds).

Keys (Flume's, same defaults except ``byteCapacity``):

| key | default | meaning |
|---|---|---|
| ``capacity`` | 100 | events the channel holds, counting puts not yet committed and takes not yet committed |
| ``transactionCapacity`` | 100 | events one transaction may put or take (at most ``capacity``) |
| ``byteCapacity`` | 268435456 (256 MiB) | body bytes the channel holds; 0 means no byte limit |
| ``byteCapacityBufferPercentage`` | 20 | share of ``byteCapacity`` kept back for headers |
| ``keep-alive`` | 3 | seconds a put waits for room before ``ChannelFullException`` |

Unlike Flume, room is reserved at put time (so ``commit`` never fails for lack of room and
a fanned-out put can be all-or-nothing), and a take never waits: an empty channel answers
at once and the sink backs off.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence

from collector_agent.channels.base import BasicChannel, Transaction
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ChannelFullException

__all__ = ["MemoryChannel"]


class _MemoryTransaction(Transaction):
    channel: MemoryChannel

    def __init__(self, channel: MemoryChannel) -> None:
        super().__init__(channel)
        self._puts: list[Event] = []
        self._put_bytes = 0
        self._takes: list[Event] = []

    def _do_put(self, events: Sequence[Event]) -> None:
        channel = self.channel
        size = sum(len(e.body) for e in events)
        channel._reserve(len(events), size)
        self._puts.extend(events)
        self._put_bytes += size

    def _do_take(self, limit: int) -> list[Event]:
        taken = self.channel._pop(limit)
        self._takes.extend(taken)
        return taken

    def _do_commit(self) -> None:
        self.channel._commit(self._puts, self._takes)
        self._puts, self._takes, self._put_bytes = [], [], 0

    def _do_rollback(self) -> None:
        self.channel._rollback(len(self._puts), self._put_bytes, self._takes)
        self._puts, self._takes, self._put_bytes = [], [], 0


class MemoryChannel(BasicChannel):
    """See the module doc for keys and semantics."""

    checks_taken = False  # hands on the objects its source checked (collector_agent/integrity.py)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._queue: deque[Event] = deque()
        self._lock = threading.Condition()
        self._used = 0  # queued + reserved by puts + taken but not committed
        self._used_bytes = 0
        self._capacity = 100
        self.transaction_capacity = 100
        self.byte_capacity = 0
        self.keep_alive = 3.0

    def configure(self, context: Context) -> None:
        capacity = context.get_int("capacity", 100, minimum=1)
        transaction_capacity = context.get_int("transactionCapacity", 100, minimum=1)
        if transaction_capacity > capacity:
            raise context.error("transactionCapacity", f"{transaction_capacity} exceeds capacity {capacity}")
        byte_capacity = context.get_int("byteCapacity", 256 * 1024 * 1024, minimum=0)
        buffer_percentage = context.get_int("byteCapacityBufferPercentage", 20, minimum=0, maximum=99)
        keep_alive = context.get_float("keep-alive", 3.0, minimum=0.0)
        super().configure(context)
        with self._lock:
            self._capacity = capacity
            self.transaction_capacity = transaction_capacity
            self.byte_capacity = byte_capacity * (100 - buffer_percentage) // 100
            self.keep_alive = keep_alive
            self._lock.notify_all()

    def _new_transaction(self) -> Transaction:
        return _MemoryTransaction(self)

    @property
    def size(self) -> int:
        return len(self._queue)

    @property
    def capacity(self) -> int:
        return self._capacity

    def _has_room(self, count: int, size: int) -> bool:
        if self._used + count > self._capacity:
            return False
        return not self.byte_capacity or self._used_bytes + size <= self.byte_capacity

    def _reserve(self, count: int, size: int) -> None:
        with self._lock:
            if not self._has_room(count, size):
                deadline = time.monotonic() + self.keep_alive
                while not self._has_room(count, size):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ChannelFullException(
                            f"channel {self.name} is full ({self._used} of {self._capacity} "
                            f"events, {self._used_bytes} of {self.byte_capacity or 'unlimited'} "
                            f"bytes): sinks are not keeping up with sources"
                        )
                    self._lock.wait(left)
            self._used += count
            self._used_bytes += size

    def _pop(self, limit: int) -> list[Event]:
        with self._lock:
            queue = self._queue
            count = min(limit, len(queue))
            return [queue.popleft() for _ in range(count)]

    def _commit(self, puts: list[Event], takes: list[Event]) -> None:
        with self._lock:
            self._queue.extend(puts)
            if takes:
                self._used -= len(takes)
                self._used_bytes -= sum(len(e.body) for e in takes)
                self._lock.notify_all()
        if puts:
            self.counters.add("EventPutSuccessCount", len(puts))
        if takes:
            self.counters.add("EventTakeSuccessCount", len(takes))

    def _rollback(self, put_count: int, put_bytes: int, takes: list[Event]) -> None:
        with self._lock:
            if takes:
                self._queue.extendleft(reversed(takes))
            if put_count:
                self._used -= put_count
                self._used_bytes -= put_bytes
                self._lock.notify_all()
