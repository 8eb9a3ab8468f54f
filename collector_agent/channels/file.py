"""The ``file`` channel: durable. A committed transaction survives ``kill -9`` and power loss.

Storage is one SQLite database in WAL mode (``<dataDirs>/channel.db``): a put commits as an
``INSERT`` of its events, a take commits as a ``DELETE`` of their rows, each SQLite commit
fsyncs the WAL (``synchronous=FULL``). Concurrent committers share one SQLite transaction
and so one fsync (group commit: whoever holds the writer lock writes every pending request).
On start the channel replays the row ids (``SELECT seq ORDER BY seq``), which is what makes
a channel of a million events ready in about a second.

Keys (Flume's names where Flume has them):

| key | default | meaning |
|---|---|---|
| ``dataDirs`` | ``artimon-data/channels/<name>`` | directory of ``channel.db`` (the first, if several) |
| ``checkpointDir`` | — | accepted for Flume compatibility, unused: the WAL is the checkpoint |
| ``capacity`` | 1000000 | events the channel holds (queued, being put, being taken) |
| ``transactionCapacity`` | 10000 | events one transaction may put or take |
| ``minimumRequiredSpace`` | 524288000 | free bytes the disk must keep; below, puts fail (floor 1 MiB) |
| ``keep-alive`` | 3 | seconds a put waits for room before ``ChannelFullException`` |
| ``fsyncPerTransaction`` | true | false trades the last transactions on power loss for speed |

Transactions: ``prepare`` writes the puts durably (they are not visible to takers yet);
``commit`` deletes the takes durably and publishes the puts. A crash after ``prepare``
replays the prepared events as committed: at least once, never lost.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path

from collector_agent.channels.base import BasicChannel, Transaction
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException, ChannelFullException
from collector_agent.lifecycle import LifecycleState

__all__ = ["FileChannel"]

log = logging.getLogger(__name__)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, headers BLOB NOT NULL, body BLOB NOT NULL)"
)
_MIN_SPACE_FLOOR = 1024 * 1024


def _runs(seqs: Iterable[int]) -> list[tuple[int, int]]:
    """Contiguous ``(first, last)`` runs of sorted ``seqs``."""
    runs: list[tuple[int, int]] = []
    for seq in sorted(seqs):
        if runs and seq == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], seq)
        else:
            runs.append((seq, seq))
    return runs


class _Ticket:
    __slots__ = ("deletes", "done", "error", "inserts")

    def __init__(self, inserts: list[tuple[int, bytes, bytes]], deletes: list[int]) -> None:
        self.inserts = inserts
        self.deletes = deletes
        self.done = False
        self.error: ChannelException | None = None


class _FileTransaction(Transaction):
    channel: FileChannel

    def __init__(self, channel: FileChannel) -> None:
        super().__init__(channel)
        self._puts: list[Event] = []
        self._put_seqs: list[int] = []
        self._takes: list[int] = []

    def _do_put(self, events: Sequence[Event]) -> None:
        channel = self.channel
        if len(self._puts) + len(events) > channel.transaction_capacity:
            raise ChannelException(
                f"put of {len(events)} events into channel {channel.name} exceeds its "
                f"transactionCapacity {channel.transaction_capacity}"
            )
        channel._check_disk()
        channel._reserve(len(events))
        self._puts.extend(events)

    def _do_take(self, limit: int) -> list[Event]:
        channel = self.channel
        room = channel.transaction_capacity - len(self._takes)
        if room <= 0:
            raise ChannelException(
                f"take from channel {channel.name}: the transaction already took "
                f"transactionCapacity {channel.transaction_capacity} events"
            )
        seqs, events = channel._take(min(limit, room))
        self._takes.extend(seqs)
        return events

    def _do_prepare(self) -> None:
        if self._puts:
            self._put_seqs = self.channel._write_puts(self._puts)

    def _do_commit(self) -> None:
        channel = self.channel
        if self._takes:
            try:
                channel._apply([], self._takes)
            except ChannelException:
                channel.counters.add("EventTakeErrorCount")
                raise
            channel._release(len(self._takes))
            channel.counters.add("EventTakeSuccessCount", len(self._takes))
        if self._put_seqs:
            channel._publish(self._put_seqs)
            channel.counters.add("EventPutSuccessCount", len(self._put_seqs))
        self._puts, self._put_seqs, self._takes = [], [], []

    def _do_rollback(self) -> None:
        channel = self.channel
        if self._put_seqs:
            try:
                channel._apply([], self._put_seqs)
            except ChannelException as exc:
                # They would come back after a restart: a duplicate, never a loss.
                log.error("channel %s: could not undo prepared puts (%s)", channel.name, exc)
        if self._puts:
            channel._release(len(self._puts))
        if self._takes:
            channel._untake(self._takes)
        self._puts, self._put_seqs, self._takes = [], [], []


class FileChannel(BasicChannel):
    """See the module doc for keys and semantics."""

    counter_names = (*BasicChannel.counter_names, "EventPutErrorCount", "EventTakeErrorCount")

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.directory = Path("artimon-data") / "channels" / name
        self._capacity = 1_000_000
        self.transaction_capacity = 10_000
        self.minimum_required_space = 500 * 1024 * 1024
        self.keep_alive = 3.0
        self.fsync = True
        self._ids: deque[int] = deque()
        self._lock = threading.Condition()
        self._used = 0
        self._next_seq = 1
        self._pending: list[_Ticket] = []
        self._pending_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._disk_checked_at = 0.0
        self._lock_fd: int | None = None
        self.replay_seconds = 0.0
        self.sqlite_commits = 0  # fewer than transaction commits when group commit works

    def configure(self, context: Context) -> None:
        capacity = context.get_int("capacity", 1_000_000, minimum=1)
        transaction_capacity = context.get_int("transactionCapacity", 10_000, minimum=1)
        if transaction_capacity > capacity:
            raise context.error("transactionCapacity", f"{transaction_capacity} exceeds capacity {capacity}")
        minimum_space = context.get_int("minimumRequiredSpace", 500 * 1024 * 1024, minimum=0)
        keep_alive = context.get_float("keep-alive", 3.0, minimum=0.0)
        fsync = context.get_bool("fsyncPerTransaction", True)
        directory = self._directory_of(context)
        if self._writer is not None and directory != self.directory:
            raise context.error("dataDirs", "cannot move a running channel (give it a new name)")
        super().configure(context)
        with self._lock:
            self.directory = directory
            self._capacity = capacity
            self.transaction_capacity = transaction_capacity
            self.minimum_required_space = max(minimum_space, _MIN_SPACE_FLOOR)
            self.keep_alive = keep_alive
            self.fsync = fsync
            self._lock.notify_all()
        if self._writer is not None:
            self._writer.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")

    def _new_transaction(self) -> Transaction:
        return _FileTransaction(self)

    def _directory_of(self, context: Context) -> Path:
        data_dirs = context.get_list("dataDirs", [])
        return (
            Path(data_dirs[0].split(",")[0]) if data_dirs else Path("artimon-data") / "channels" / self.name
        )

    def can_reconfigure(self, context: Context) -> bool:
        """A running file channel cannot move to another directory."""
        return self._writer is None or self._directory_of(context) == self.directory

    # -- lifecycle ---------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.directory / "channel.db",
            isolation_level=None,
            check_same_thread=False,
            timeout=30,
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={'FULL' if self.fsync else 'NORMAL'}")
        return conn

    def start(self) -> None:
        if self._writer is not None:
            super().start()
            return
        started = time.monotonic()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock_directory()
            writer = self._connect()
            writer.execute(_SCHEMA)
            reader = self._connect()
            seqs = [row[0] for row in writer.execute("SELECT seq FROM events ORDER BY seq")]
        except (OSError, sqlite3.Error) as exc:
            self.state = LifecycleState.ERROR
            self._unlock_directory()
            raise ChannelException(f"channel {self.name}: cannot open {self.directory}: {exc}") from None
        self._writer, self._reader = writer, reader
        with self._lock:
            self._ids = deque(seqs)
            self._used = len(seqs)
            self._next_seq = (seqs[-1] + 1) if seqs else 1
        self.replay_seconds = time.monotonic() - started
        log.info("channel %s: replayed %d events in %.2f s", self.name, len(seqs), self.replay_seconds)
        super().start()

    def stop(self) -> None:
        super().stop()
        with self._write_lock, self._read_lock:
            for conn in (self._writer, self._reader):
                if conn is not None:
                    conn.close()
            self._writer = self._reader = None
        self._unlock_directory()

    def _lock_directory(self) -> None:
        """One channel per directory (Flume's ``in_use.lock``): a second one would reuse
        sequence numbers and corrupt both."""
        fd = os.open(self.directory / "in_use.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise OSError(f"{self.directory} is in use by another channel (in_use.lock is held)") from None
        self._lock_fd = fd

    def _unlock_directory(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    # -- capacity ----------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return len(self._ids)

    @property
    def capacity(self) -> int:
        return self._capacity

    def _check_disk(self) -> None:
        now = time.monotonic()
        if now - self._disk_checked_at < 1.0:
            return
        free = shutil.disk_usage(self.directory).free
        if free < self.minimum_required_space:
            self.counters.add("EventPutErrorCount")
            raise ChannelFullException(
                f"channel {self.name}: {self.directory} has {free} bytes free, below "
                f"minimumRequiredSpace {self.minimum_required_space}"
            )
        self._disk_checked_at = now

    def _reserve(self, count: int) -> None:
        with self._lock:
            if self._used + count > self._capacity:
                deadline = time.monotonic() + self.keep_alive
                while self._used + count > self._capacity:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ChannelFullException(
                            f"channel {self.name} is full ({self._used} of {self._capacity} "
                            "events): sinks are not keeping up with sources"
                        )
                    self._lock.wait(left)
            self._used += count

    def _release(self, count: int) -> None:
        with self._lock:
            self._used -= count
            self._lock.notify_all()

    # -- storage -----------------------------------------------------------------------------

    def _write_puts(self, events: Sequence[Event]) -> list[int]:
        with self._lock:
            first = self._next_seq
            self._next_seq += len(events)
        seqs = list(range(first, first + len(events)))
        dumps = json.dumps
        rows = [
            (seq, dumps(e.headers, separators=(",", ":")).encode(), e.body)
            for seq, e in zip(seqs, events, strict=True)
        ]
        try:
            self._apply(rows, [])
        except ChannelException:
            self.counters.add("EventPutErrorCount")
            raise
        return seqs

    def _apply(self, inserts: list[tuple[int, bytes, bytes]], deletes: list[int]) -> None:
        """Write inserts and deletes durably, grouped with whatever else is pending."""
        ticket = _Ticket(inserts, deletes)
        with self._pending_lock:
            self._pending.append(ticket)
        with self._write_lock:
            if not ticket.done:
                with self._pending_lock:
                    batch, self._pending = self._pending, []
                error = self._write(batch)
                for pending in batch:
                    pending.error = error
                    pending.done = True
        if ticket.error is not None:
            raise ticket.error

    def _write(self, batch: list[_Ticket]) -> ChannelException | None:
        conn = self._writer
        if conn is None:
            return ChannelException(f"channel {self.name} is stopped")
        try:
            conn.execute("BEGIN IMMEDIATE")
            for ticket in batch:
                if ticket.inserts:
                    conn.executemany(
                        "INSERT INTO events (seq, headers, body) VALUES (?, ?, ?)", ticket.inserts
                    )
                if ticket.deletes:
                    conn.executemany("DELETE FROM events WHERE seq BETWEEN ? AND ?", _runs(ticket.deletes))
            conn.execute("COMMIT")
            self.sqlite_commits += 1
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            return ChannelException(f"channel {self.name}: write failed: {exc}")
        return None

    def _publish(self, seqs: list[int]) -> None:
        with self._lock:
            self._ids.extend(seqs)

    def _take(self, limit: int) -> tuple[list[int], list[Event]]:
        with self._lock:
            count = min(limit, len(self._ids))
            seqs = [self._ids.popleft() for _ in range(count)]
        if not seqs:
            return [], []
        try:
            rows = self._read(seqs)
        except sqlite3.Error as exc:
            self._untake(seqs)
            self.counters.add("EventTakeErrorCount")
            raise ChannelException(f"channel {self.name}: read failed: {exc}") from None
        loads = json.loads
        events = []
        for seq in seqs:
            headers, body = rows[seq]
            events.append(Event(loads(headers), bytes(body)))
        return seqs, events

    def _read(self, seqs: list[int]) -> dict[int, tuple[bytes, bytes]]:
        wanted = set(seqs)
        rows: dict[int, tuple[bytes, bytes]] = {}
        with self._read_lock:
            conn = self._reader
            if conn is None:
                raise sqlite3.OperationalError("channel is stopped")
            for first, last in _runs(seqs):
                for seq, headers, body in conn.execute(
                    "SELECT seq, headers, body FROM events WHERE seq BETWEEN ? AND ?", (first, last)
                ):
                    if seq in wanted:
                        rows[seq] = (headers, body)
        if len(rows) != len(wanted):
            raise sqlite3.DatabaseError(f"{len(wanted) - len(rows)} committed events are missing")
        return rows

    def _untake(self, seqs: list[int]) -> None:
        with self._lock:
            self._ids.extendleft(reversed(seqs))
