"""The ``file`` channel's log (Flume's ``Log``): the SQLite database its events are kept in,
and the group commit that writes it.

Storage is one SQLite database (``<dataDirs>/channel.db``), laid out so that the work per
event stays small:

- ``batches(seq, count, data, format)``: one row per committed put transaction; ``data``
  holds its events, each with a CRC32C checksum (the layout is in ``format.py``);
- ``consumed(seq, first, last)``: events ``[first, last)`` of batch ``seq`` that takes have
  committed while the rest of the batch is still waiting. A batch whose events are all
  consumed is deleted with its ranges;
- ``groups(seq, txn, peers, decided)``: the batches of a put into several durable channels
  (``groups.py``).

A put's ``prepare`` inserts its batch row; a take's ``commit`` records what it consumed.
SQLite's write-ahead log (``journal_mode=WAL``, ``synchronous=FULL``) makes each commit
atomic and durable with one fsync (a rollback journal takes three); the log is copied into
``channel.db`` beside the committers (``checkpoint.py``), off the commit path.

Group commit: concurrent committers share one SQLite transaction and so one fsync. Each
hands its statements over as a ticket; whoever holds the writer lock writes every pending
ticket in one transaction, and each ticket gets its outcome. A ticket of an older epoch (a
salvage replaced the database since) fails unwritten.

Bookkeeping before puts: the records of take commits and rollbacks are "essential". When
SQLite refuses a group commit for a full disk, the channel releases its reserve
(``space.py``), the log is checkpointed and truncated, and the essential tickets are
written again on their own; the puts among them fail (``ChannelFullException``). A take
whose record still cannot be written fails its commit: its events go back to the head of
the channel, so what a sink committed is on disk before the sink hears so. A rollback's
deletes that cannot be written are kept and written with the next commits (a crash before
then brings back a put its source was told had failed: at least once).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from collector_agent.channels.file.checkpoint import (
    LIMIT_BYTES,
    TIGHT_BYTES,
    TRIGGER_BYTES,
    Checkpointer,
    start_checkpointer,
)
from collector_agent.channels.file.damage import is_damage
from collector_agent.channels.file.groups import GROUPS_SCHEMA
from collector_agent.counters import CounterGroup
from collector_agent.exceptions import ChannelException, ChannelFullException

__all__ = ["PAGE_SIZE", "SCHEMA", "DamagedDatabase", "Log", "Op"]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS batches (seq INTEGER PRIMARY KEY, count INTEGER NOT NULL,"
    " data BLOB NOT NULL, format INTEGER NOT NULL DEFAULT 1)",
    "CREATE TABLE IF NOT EXISTS consumed"
    " (seq INTEGER NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS consumed_seq ON consumed (seq)",
    *GROUPS_SCHEMA,
)
# a commit rewrites whole pages into the write-ahead log (the tree's leaf, the header), and
# writes each page as a frame of its own: 16 KiB pages measured best for batches of 100 KB
# to 16 MB (4 KiB: frames by the hundred; 64 KiB: 128 KiB rewritten a commit); a database
# made with 64 KiB pages keeps them
PAGE_SIZE = 16384
_SQLITE_FULL = 13

# (sql, rows) pairs a group commit executes in order
Op = tuple[str, list[tuple[object, ...]]]


class DamagedDatabase(ChannelException):
    """SQLite says the file is damaged: the channel salvages it."""


class _Ticket:
    __slots__ = ("done", "epoch", "error", "essential", "ops")

    def __init__(self, ops: list[Op], epoch: int, essential: bool) -> None:
        self.ops = ops
        self.epoch = epoch
        self.essential = essential
        self.done = False
        self.error: ChannelException | None = None


class Log:
    """The writer and reader connections of one database (``None`` while closed), its
    group commit, its deferred deletes and its checkpointer. ``epoch`` tells the current
    epoch; ``on_full(essential)`` is called when SQLite refuses a write for a full disk
    (with ``True``, it releases the reserve for essential tickets); ``tight`` tells whether
    the disk is short of space (``space.py``)."""

    def __init__(
        self,
        name: str,
        counters: CounterGroup,
        epoch: Callable[[], int],
        on_full: Callable[[bool], object],
        tight: Callable[[], bool],
    ) -> None:
        self.name = name
        self.database = Path("channel.db")
        self.fsync = True
        self.writer: sqlite3.Connection | None = None
        self.reader: sqlite3.Connection | None = None
        self.write_lock = threading.Lock()  # held by a group commit, a salvage, a close
        self.commits = 0  # fewer than transaction commits when group commit works
        self._counters = counters
        self._epoch = epoch
        self._on_full = on_full
        self._tight = tight
        self._pending: list[_Ticket] = []
        self._pending_lock = threading.Lock()
        self._deferred: list[Op] = []  # a rollback's deletes a failed write left to retry
        self._deferred_lock = threading.Lock()
        self._deferred_tried = 0.0
        self._checkpointer: Checkpointer | None = None
        self._size_limit = LIMIT_BYTES + TRIGGER_BYTES  # the writer's journal_size_limit

    def set_fsync(self, fsync: bool) -> None:
        with self.write_lock:
            self.fsync = fsync
            if self.writer is not None:
                self.writer.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.database, isolation_level=None, check_same_thread=False, timeout=30)
        try:
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # takes effect when the file is created
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer's thread does it
            # the log's file, once restarted, keeps its blocks for the next commits to overwrite
            conn.execute(f"PRAGMA journal_size_limit={LIMIT_BYTES + TRIGGER_BYTES}")
            # Debian builds SQLite to zero every freed page, which journals each one first: a
            # take's delete would write its events twice more, and need as much free disk
            conn.execute("PRAGMA secure_delete=FAST")
            conn.execute(f"PRAGMA synchronous={'FULL' if self.fsync else 'NORMAL'}")
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def attach(self, writer: sqlite3.Connection, reader: sqlite3.Connection) -> None:
        """Use these connections (opened and read back) and start the checkpointer."""
        self.writer, self.reader = writer, reader
        self._size_limit = LIMIT_BYTES + TRIGGER_BYTES  # as connect() set it
        self._checkpointer = start_checkpointer(
            self.database, self.name, writer, lambda: self._counters.add("CheckpointErrorCount"), self._tight
        )

    def close(self) -> None:
        """Stop the checkpointer and close the connections (the caller holds the write lock
        and the reader's lock)."""
        if self._checkpointer is not None:
            self._checkpointer.stop()
            self._checkpointer = None
        for conn in (self.writer, self.reader):
            if conn is not None:
                conn.close()
        self.writer = self.reader = None

    def checkpoint(self, mode: str = "PASSIVE") -> None:
        if self._checkpointer is not None:
            self._checkpointer.checkpoint(mode)

    def wrote(self, size: int) -> None:
        """Tell the checkpointer what a commit added to the log: its data, and the pages of
        the tree and the header it rewrote (three, about)."""
        checkpointer = self._checkpointer
        if checkpointer is not None:
            checkpointer.wrote(size + 3 * PAGE_SIZE)

    def apply(self, ops: list[Op], epoch: int, essential: bool = False) -> None:
        """Execute ``ops`` durably, grouped with whatever else is pending; ``essential``
        bookkeeping may use the reserve (see the module doc)."""
        ticket = _Ticket(ops, epoch, essential)
        with self._pending_lock:
            self._pending.append(ticket)
        with self.write_lock:
            if not ticket.done:
                with self._pending_lock:
                    batch, self._pending = self._pending, []
                self._write(batch)
        if ticket.error is not None:
            raise ticket.error

    def _write(self, batch: list[_Ticket]) -> None:
        """Write the tickets of the current epoch in one SQLite transaction (called with the
        write lock held); each ticket gets its outcome."""
        epoch = self._epoch()
        stale = [t for t in batch if t.epoch != epoch]
        current = [t for t in batch if t.epoch == epoch]
        for ticket in stale:
            ticket.error = ChannelException(f"channel {self.name} was salvaged during this transaction")
            ticket.done = True
        error = self._execute(current)
        essential = [t for t in current if t.essential]
        if isinstance(error, ChannelFullException):
            self._on_full(bool(essential))
        if isinstance(error, ChannelFullException) and essential:
            # the room a full disk leaves the bookkeeping: the reserve, the log's own blocks
            self.checkpoint("TRUNCATE")
            retried = self._execute(essential)
            for ticket in essential:
                ticket.error = retried
                ticket.done = True
        for ticket in current:
            if not ticket.done:
                ticket.error = error
                ticket.done = True

    def _execute(self, batch: list[_Ticket]) -> ChannelException | None:
        conn = self.writer
        if conn is None:
            return ChannelException(f"channel {self.name} is stopped")
        if not batch:
            return None
        try:
            limit = TIGHT_BYTES if self._tight() else LIMIT_BYTES + TRIGGER_BYTES
            if limit != self._size_limit:  # the file kept when the log starts again (checkpoint.py)
                conn.execute(f"PRAGMA journal_size_limit={limit}")
                self._size_limit = limit
            conn.execute("BEGIN IMMEDIATE")
            for ticket in batch:
                for sql, rows in ticket.ops:
                    conn.executemany(sql, rows)
            conn.execute("COMMIT")
            self.commits += 1
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            with contextlib.suppress(sqlite3.Error, UnicodeDecodeError):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            if is_damage(exc):
                return DamagedDatabase(f"channel {self.name}: write failed: {exc}")
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF == _SQLITE_FULL:
                return ChannelFullException(f"channel {self.name}: write failed, the disk is full: {exc}")
            return ChannelException(f"channel {self.name}: write failed: {exc}")
        return None

    def record(self, ops: list[Op], epoch: int, keep: bool = False) -> None:
        """Write bookkeeping ``ops`` now (essential), with the deletes earlier writes left;
        ``ChannelException`` if that fails (``DamagedDatabase``: the caller salvages). With
        ``keep`` (a rollback's deletes), failed ``ops`` are kept for the next try."""
        with self._deferred_lock:
            deferred, self._deferred = self._deferred, []
            self._deferred_tried = time.monotonic()
        if not ops and not deferred:
            return
        try:
            self.apply(deferred + ops, epoch, essential=True)
        except ChannelException:
            with self._deferred_lock:
                self._deferred = deferred + (ops if keep else []) + self._deferred
            raise

    def retry_due(self, force: bool = False) -> bool:
        """Whether deletes a full disk refused wait for a retry (at most once a second
        unless ``force``)."""
        return bool(self._deferred) and (force or time.monotonic() - self._deferred_tried >= 1.0)

    def take_deferred(self) -> list[Op]:
        """The deletes still to write, handed to a salvage (which writes them itself)."""
        with self._deferred_lock:
            deferred, self._deferred = self._deferred, []
        return deferred
