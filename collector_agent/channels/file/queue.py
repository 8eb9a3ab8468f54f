"""The ``file`` channel's queue (Flume's ``FlumeEventQueue``): which stored events wait to be
taken, in order, as pointers into the log, and the room left for more.

An event is pointed at by its batch's ``seq`` and its index in the batch; the queue holds
ranges ``[seq, first, last)`` of them, so that a batch of ten thousand events is one entry.
Beside the ranges it keeps, per stored batch, how many events the batch has and how many
committed takes consumed (a batch all consumed leaves the log), and which of its events
were set aside as damaged (a rolled-back take meets them again: they are written once).

Capacity counts events from their ``put`` (before its commit) until the commit of their
take: a put waits ``keep-alive`` seconds for room, then ``ChannelFullException``.

The queue is rebuilt from the log's rows (:meth:`EventQueue.replay`): counts and consumed
ranges, not the events, so a channel of a million events is ready in well under a second.

Epochs: a salvage replaces the database, and the queue is rebuilt from what survived in a
new epoch. A transaction belongs to the epoch it began in: what it asks of a newer epoch
fails (``ChannelException``: roll back and retry), and what it gives back (room, taken
events) is ignored, the rebuilt queue having counted them afresh.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import TypeVar

from collector_agent.exceptions import ChannelException, ChannelFullException

__all__ = ["EventQueue", "Range"]

# [seq, first, last): events first..last-1 of batch seq
Range = list[int]
# what a caller attaches to an event it names by (seq, index)
_Item = TypeVar("_Item")


class EventQueue:
    """Thread-safe; every method takes :attr:`lock` (a condition: puts wait on it for room)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock = threading.Condition()
        self.epoch = 0
        self.capacity = 1_000_000
        self.size = 0  # committed events waiting to be taken
        self._ranges: deque[Range] = deque()
        self._counts: dict[int, int] = {}  # events per stored batch
        self._consumed: dict[int, int] = {}  # events of a batch whose take committed
        self._set_aside: set[tuple[int, int]] = set()  # (seq, index) written as dead letters
        self._used = 0
        self._next_seq = 1

    def _check(self, epoch: int) -> None:
        if epoch != self.epoch:
            raise ChannelException(f"channel {self.name} was salvaged during this transaction")

    def resize(self, capacity: int) -> None:
        with self.lock:
            self.capacity = capacity
            self.lock.notify_all()

    def replay(
        self, batches: list[tuple[int, int]], consumed: list[tuple[int, int, int]], new_epoch: bool = False
    ) -> None:
        """Rebuild the queue from the log's ``batches(seq, count)`` and ``consumed(seq, first,
        last)`` rows (both in order); ``new_epoch`` after a salvage."""
        taken: dict[int, list[tuple[int, int]]] = {}
        for seq, first, last in consumed:
            taken.setdefault(seq, []).append((first, last))
        ranges: deque[Range] = deque()
        counts: dict[int, int] = {}
        done_counts: dict[int, int] = {}
        size = 0
        for seq, count in batches:
            position = 0
            done = 0
            for first, last in taken.get(seq, []):
                if first > position:
                    ranges.append([seq, position, first])
                position = max(position, last)
                done += last - first
            if position < count:
                ranges.append([seq, position, count])
            counts[seq] = count
            done_counts[seq] = done
            size += count - done
        # a consumed range can outlive its batch (a take's record retried after the batch's
        # delete was written): a new batch must not take that number
        highest = max([seq for seq, _ in batches] + [seq for seq, _, _ in consumed], default=0)
        with self.lock:
            if new_epoch:
                self.epoch += 1
            self._ranges = ranges
            self._counts, self._consumed, self._set_aside = counts, done_counts, set()
            self.size = self._used = size
            self._next_seq = highest + 1
            self.lock.notify_all()  # after a salvage, room may have come back

    def new_epoch(self) -> None:
        """A salvage failed: every transaction begun so far fails."""
        with self.lock:
            self.epoch += 1

    # -- puts ----------------------------------------------------------------------------------

    def reserve(self, count: int, keep_alive: float) -> None:
        """Room for ``count`` events, waiting up to ``keep_alive`` seconds for it."""
        with self.lock:
            if self._used + count > self.capacity:
                deadline = time.monotonic() + keep_alive
                while self._used + count > self.capacity:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ChannelFullException(
                            f"channel {self.name} is full ({self._used} of {self.capacity} "
                            "events): sinks are not keeping up with sources"
                        )
                    self.lock.wait(left)
            self._used += count

    def release(self, count: int, epoch: int) -> None:
        with self.lock:
            if epoch == self.epoch:  # a salvage counted the room afresh
                self._used -= count
            self.lock.notify_all()

    def next_seq(self) -> int:
        """The number of the next batch the log stores."""
        with self.lock:
            seq = self._next_seq
            self._next_seq += 1
            return seq

    def publish(self, seq: int, count: int, epoch: int) -> None:
        """Batch ``seq`` of ``count`` events is committed: queue it."""
        with self.lock:
            self._check(epoch)
            self._counts[seq] = count
            self._consumed[seq] = 0
            self._ranges.append([seq, 0, count])
            self.size += count

    # -- takes ---------------------------------------------------------------------------------

    def count_of(self, seq: int) -> int | None:
        """The events of stored batch ``seq`` (``None`` if it is no longer stored)."""
        return self._counts.get(seq)

    def pop(self, limit: int, epoch: int) -> list[Range]:
        """Up to ``limit`` events from the head of the queue, as ranges."""
        ranges: list[Range] = []
        with self.lock:
            self._check(epoch)
            wanted = limit
            while wanted and self._ranges:
                seq, first, last = head = self._ranges[0]
                if last - first <= wanted:
                    self._ranges.popleft()
                    ranges.append(head)
                    wanted -= last - first
                else:
                    ranges.append([seq, first, first + wanted])
                    head[1] = first + wanted
                    wanted = 0
            self.size -= limit - wanted
        return ranges

    def untake(self, ranges: list[Range], epoch: int) -> None:
        """Put taken ranges back at the head, in their order (a rolled-back take)."""
        with self.lock:
            if epoch != self.epoch:
                return  # a salvage queued them again from disk
            for taken in reversed(ranges):
                head = self._ranges[0] if self._ranges else None
                if head is not None and head[0] == taken[0] and head[1] == taken[2]:
                    head[1] = taken[1]  # the rest of the same batch: join them again
                else:
                    self._ranges.appendleft(list(taken))
                self.size += taken[2] - taken[1]

    def finishing(self, per_batch: dict[int, int], epoch: int) -> list[int]:
        """The batches that consuming ``per_batch`` events of each would finish (they leave
        the log with that record)."""
        with self.lock:
            self._check(epoch)
            return [seq for seq, n in per_batch.items() if self._consumed[seq] + n == self._counts[seq]]

    def consume(self, per_batch: dict[int, int], epoch: int) -> None:
        """Count ``per_batch`` events of each batch as consumed (their record is written);
        the batches all consumed are forgotten."""
        with self.lock:
            self._check(epoch)
            finished = [seq for seq, n in per_batch.items() if self._consumed[seq] + n == self._counts[seq]]
            for seq, n in per_batch.items():
                self._consumed[seq] += n
            for seq in finished:
                del self._counts[seq], self._consumed[seq]
            if self._set_aside and finished:
                done = set(finished)
                self._set_aside = {key for key in self._set_aside if key[0] not in done}

    # -- damage --------------------------------------------------------------------------------

    def not_set_aside(self, damaged: list[tuple[int, int, _Item]]) -> list[tuple[int, int, _Item]]:
        """The events of ``damaged`` (``(seq, index, ...)``) not set aside yet."""
        with self.lock:
            return [entry for entry in damaged if (entry[0], entry[1]) not in self._set_aside]

    def mark_set_aside(self, damaged: list[tuple[int, int, _Item]]) -> None:
        with self.lock:
            self._set_aside.update((entry[0], entry[1]) for entry in damaged)

    def waiting(self) -> dict[int, int]:
        """Per stored batch, its events not consumed and not set aside yet."""
        with self.lock:
            waiting = {seq: self._counts[seq] - self._consumed[seq] for seq in self._counts}
            for seq, index in self._set_aside:  # counted once already, when set aside
                if any(r[0] == seq and r[1] <= index < r[2] for r in self._ranges):
                    waiting[seq] -= 1
        return waiting
