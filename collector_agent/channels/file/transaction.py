"""The ``file`` channel's transaction: the hooks of ``channels/base.py``'s state machine, each
driving the channel's parts (the state diagram is in ``channel.py``).

- ``put``: room reserved in the queue; the events stay in memory until ``prepare``.
- ``take``: ranges popped from the queue and read (``reader.py``); damaged events are set
  aside on the way (``damage.py``) and their ranges kept with the rest, so that the commit
  consumes them; a read failure puts the ranges back and fails the take.
- ``prepare``: the puts packed as one batch (``format.py``), the disk space spent
  (``space.py``) and the batch written by one group commit (``log.py``), undecided if it is a
  group's put (``groups.py``); ``decide`` writes it down as kept.
- ``commit``: the takes recorded in the log, then consumed (out of the queue) and the room
  they held released; the put's batch queued. A take whose record cannot be written (a
  full disk even after the reserve was released) fails the commit with nothing consumed,
  and the sink's rollback puts its events back at the head.
- ``rollback``: a prepared batch deleted (with a later commit if the disk refuses), the room
  released, taken ranges back at the head.

Every hook but ``rollback`` first checks that the channel is open and still in the
transaction's epoch (a rollback in an older epoch has nothing left to undo); a damaged
database met on the way is salvaged (``recovery.py``) and the hook fails.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from collector_agent.channels.base import PutGroup, Transaction
from collector_agent.channels.file.damage import is_damage
from collector_agent.channels.file.format import CHECKSUMMED, Damaged, pack_events
from collector_agent.channels.file.log import DamagedDatabase, Op
from collector_agent.channels.file.queue import Range
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException

if TYPE_CHECKING:
    from collector_agent.channels.file.channel import FileChannel

__all__ = ["FileTransaction"]


class FileTransaction(Transaction):
    channel: FileChannel

    def __init__(self, channel: FileChannel) -> None:
        super().__init__(channel)
        self._epoch = channel.queue.epoch  # a salvage starts a new epoch: older transactions fail
        self._puts: list[Event] = []
        self._put_seq: int | None = None
        self._grouped = False
        self._takes: list[Range] = []
        self._taken = 0  # events of the taken ranges, damaged ones included
        self._delivered = 0

    def _do_put(self, events: Sequence[Event]) -> None:
        channel = self.channel
        self._check_usable()
        channel.queue.reserve(len(events), channel.keep_alive)
        self._puts.extend(events)

    def _do_take(self, limit: int) -> list[Event]:
        self._check_usable()
        ranges, events = self._take(limit)
        self._takes.extend(ranges)
        self._taken += sum(last - first for _, first, last in ranges)
        self._delivered += len(events)
        return events

    def _do_prepare(self, group: PutGroup | None) -> None:
        if self._puts:
            self._check_usable()
            self._put_seq = self._write_batch(group)
            self._grouped = group is not None

    def _do_decide(self) -> None:
        if self._put_seq is not None and self._grouped:
            self._check_usable()
            self._write([("UPDATE groups SET decided = 1 WHERE seq = ?", [(self._put_seq,)])])

    def _do_commit(self) -> None:
        channel = self.channel
        self._check_usable()
        if self._takes:
            self._consume()
            channel.queue.release(self._taken, self._epoch)
            channel.counters.add("EventTakeSuccessCount", self._delivered)
        else:
            channel.retry_deferred(self._epoch)
        if self._put_seq is not None:
            channel.queue.publish(self._put_seq, len(self._puts), self._epoch)
            channel.counters.add("EventPutSuccessCount", len(self._puts))
        self._reset()

    def _do_rollback(self) -> None:
        channel = self.channel
        if self._epoch != channel.queue.epoch:
            # a salvage replayed the channel from disk since: none of this is held any more
            self._reset()
            return
        if self._put_seq is not None:
            # if it cannot be deleted now, it is retried; a crash meanwhile duplicates it
            rows: list[tuple[object, ...]] = [(self._put_seq,)]
            with contextlib.suppress(ChannelException):
                channel.record(
                    [("DELETE FROM batches WHERE seq = ?", rows), ("DELETE FROM groups WHERE seq = ?", rows)],
                    self._epoch,
                    keep=True,
                )
        if self._puts:
            channel.queue.release(len(self._puts), self._epoch)
        if self._takes:
            channel.queue.untake(self._takes, self._epoch)
        self._reset()

    def _check_usable(self) -> None:
        channel = self.channel
        if channel.commit_log.writer is None:
            why = channel.failure or "stopped"
            raise ChannelException(
                f"channel {channel.name} is {'unavailable: ' + why if channel.failure else why}"
            )
        if self._epoch != channel.queue.epoch:
            raise ChannelException(
                f"channel {channel.name} was salvaged during this transaction: roll it back and retry"
            )

    def _reset(self) -> None:
        self._puts, self._put_seq, self._takes, self._taken, self._delivered = [], None, [], 0, 0
        self._grouped = False

    # -- puts ----------------------------------------------------------------------------------

    def _write_batch(self, group: PutGroup | None) -> int:
        channel = self.channel
        seq = channel.queue.next_seq()
        blob = pack_events(self._puts)
        try:
            channel.space.spend(len(blob))
        except ChannelException:
            channel.counters.add("EventPutErrorCount")
            raise
        ops: list[Op] = [
            (
                "INSERT INTO batches (seq, count, format, data) VALUES (?, ?, ?, ?)",
                [(seq, len(self._puts), CHECKSUMMED, blob)],
            )
        ]
        if group is not None:  # undecided until every member is prepared (groups.py)
            peers = json.dumps([member for member in group.members if member != channel.durable_id])
            ops.append(("INSERT INTO groups (seq, txn, peers) VALUES (?, ?, ?)", [(seq, group.txn, peers)]))
        self._write(ops)
        channel.commit_log.wrote(len(blob))
        return seq

    def _write(self, ops: list[Op]) -> None:
        """A put's durable writes; a damaged database is salvaged and the put refused."""
        channel = self.channel
        try:
            channel.commit_log.apply(ops, self._epoch)
        except ChannelException as exc:
            channel.counters.add("EventPutErrorCount")
            if isinstance(exc, DamagedDatabase):
                channel.recover(self._epoch, str(exc))
                raise ChannelException(str(exc)) from None
            raise

    # -- takes ---------------------------------------------------------------------------------

    def _take(self, limit: int) -> tuple[list[Range], list[Event]]:
        """Up to ``limit`` sound events (damaged ones are set aside on the way, and their
        ranges returned with the rest so that the commit consumes them)."""
        channel, epoch = self.channel, self._epoch
        taken: list[Range] = []
        events: list[Event] = []
        while len(events) < limit:
            ranges = channel.queue.pop(limit - len(events), epoch)
            if not ranges:
                break
            taken.extend(ranges)
            try:
                damaged = channel.reader.events_of(ranges, events)
                if damaged:
                    self._set_aside(damaged)
            except (sqlite3.Error, UnicodeDecodeError, OSError, ChannelException) as exc:
                channel.queue.untake(taken, epoch)
                channel.counters.add("EventTakeErrorCount")
                if is_damage(exc):
                    channel.recover(epoch, f"read failed: {exc}")
                raise ChannelException(f"channel {channel.name}: read failed: {exc}") from None
        return taken, events

    def _set_aside(self, damaged: list[tuple[int, int, Damaged]]) -> None:
        """Write damaged events to the dead-letter file once (a rolled-back take meets them
        again); ``OSError`` if it cannot be written, and then the take fails."""
        queue = self.channel.queue
        new = queue.not_set_aside(damaged)
        if new:
            self.channel.dead_letters.set_aside(new)
            queue.mark_set_aside(new)

    def _consume(self) -> None:
        """Record the taken ranges as consumed, then take them out of the channel; nothing
        changes if the record cannot be written (``ChannelException``)."""
        channel = self.channel
        per_batch: dict[int, int] = {}
        for seq, first, last in self._takes:
            per_batch[seq] = per_batch.get(seq, 0) + last - first
        # one take commit at a time between the count and the record: two commits that
        # finish a batch together must agree on which one deletes it
        with channel.take_lock:
            finished = channel.queue.finishing(per_batch, self._epoch)
            done = set(finished)
            partial = [(seq, first, last) for seq, first, last in self._takes if seq not in done]
            ops: list[Op] = []
            if finished:
                rows = [(seq,) for seq in finished]
                ops.append(("DELETE FROM batches WHERE seq = ?", list(rows)))
                ops.append(("DELETE FROM consumed WHERE seq = ?", list(rows)))
                ops.append(("DELETE FROM groups WHERE seq = ?", list(rows)))
            if partial:
                ops.append(("INSERT INTO consumed (seq, first, last) VALUES (?, ?, ?)", list(partial)))
            try:
                channel.record(ops, self._epoch)
            except ChannelException:
                channel.counters.add("EventTakeErrorCount")
                raise
            channel.queue.consume(per_batch, self._epoch)
        channel.reader.forget(finished)
        channel.commit_log.wrote(0)
