"""The ``file`` channel: durable. A committed transaction survives ``kill -9`` and power loss;
a damaged byte is never delivered as an event.

Storage is one SQLite database (``<dataDirs>/channel.db``), laid out so that the work per
event stays small:

- ``batches(seq, count, data, format)``: one row per committed put transaction; ``data``
  holds its events, each with a CRC32C checksum (the layout is in ``file_format.py``);
- ``consumed(seq, first, last)``: events ``[first, last)`` of batch ``seq`` that takes have
  committed while the rest of the batch is still waiting. A batch whose events are all
  consumed is deleted with its ranges.

A put's ``prepare`` inserts its batch row; a take's ``commit`` records what it consumed.
SQLite's write-ahead log (``journal_mode=WAL``, ``synchronous=FULL``) makes each commit
atomic and durable with one fsync, where the rollback journal used before took three (the
journal, its header, the database): for small transactions those fsyncs were the whole
cost. The log is copied into ``channel.db`` beside the committers
(``file_checkpoint.py``), which keeps the second write of every byte off the commit path.
Concurrent committers share one SQLite transaction and so one fsync (group commit:
whoever holds the writer lock writes every pending request). On start the channel replays
``batches`` and ``consumed`` (counts and ranges, not the events), so a channel of a million
events is ready in well under a second.

Integrity:

- Every event's checksum is verified when it is taken. An event that fails (and any event
  of a batch SQLite can no longer find) is *set aside*: appended to
  ``<deadLetter.dir>/channel-<name>.jsonl`` (fsynced), counted in ``EventDamagedCount``,
  and consumed with the take, which delivers the rest.
- A database SQLite reports damaged, at start or while running, is salvaged
  (``file_salvage.py``): what it can still read goes into a fresh ``channel.db``, the
  damaged file is kept as ``channel.db.corrupt-<time>``, and the events of batches that were
  held in memory but could not be read are set aside (counted). Transactions in flight
  during a salvage fail their commit, and their events come back: at least once.
- A channel that cannot start (its directory held by another process, unreadable, full)
  is in ``ERROR`` with ``Unhealthy`` 1; its puts and takes fail with ``ChannelException``
  (sources and sinks back off) and the agent retries the start.

A put into several durable channels at once (a :class:`~collector_agent.channels.base.PutGroup`
from the channel processor) is written undecided at ``prepare`` and decided at ``decide``
(one more fsync); at start, a batch a crash left undecided is kept if a peer channel had
decided it and undone if none had (``EventUndoneCount``), so a killed agent never leaves a
put in some of its channels only (``file_groups.py``).

Disk space: a put is refused at ``prepare``, before anything is handed on, when writing it
would leave less than ``minimumRequiredSpace`` free (the free space is read at most once a
second and lowered by every batch written since, so a burst cannot overshoot it). A take's
commit that cannot be recorded (a full disk) is not undone: its events were delivered, so
they stay out of the channel, and the record is retried with the next commits
(``UnrecordedTakeCount`` events wait for it). Only a crash before it is written brings them
back.

Keys (Flume's names where Flume has them):

| key | default | meaning |
|---|---|---|
| ``dataDirs`` | ``artimon-data/channels/<name>`` | directory of ``channel.db`` (the first, if several) |
| ``checkpointDir`` | — | accepted for Flume compatibility, unused: the database is the checkpoint |
| ``capacity`` | 1000000 | events the channel holds (queued, being put, being taken) |
| ``transactionCapacity`` | 10000 | events one transaction may put or take |
| ``minimumRequiredSpace`` | 524288000 | free bytes the disk must keep after a put (floor 1 MiB) |
| ``keep-alive`` | 3 | seconds a put waits for room before ``ChannelFullException`` |
| ``fsyncPerTransaction`` | true | false trades the last transactions on power loss for speed |
| ``deadLetter.dir`` | ``artimon-data/dead-letter`` | where damaged events are set aside |

A crash after ``prepare`` replays the prepared events as committed: at least once, never
lost (for a put of a group: once a member has decided it). A directory serves one channel
at a time (``in_use.lock``, held with ``flock``; a second one is refused naming the
holder's PID).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bookkeeper import DirectoryInUseError
from bookkeeper.ground import DirectoryLock
from collector_agent.channels.base import BasicChannel, PutGroup, Transaction
from collector_agent.channels.file_checkpoint import LIMIT_BYTES, TRIGGER_BYTES, Checkpointer
from collector_agent.channels.file_format import CHECKSUMMED, Damaged, Stored, pack_events, unpack_events
from collector_agent.channels.file_groups import GROUPS_SCHEMA, resolve_in_doubt
from collector_agent.channels.file_salvage import finish_interrupted, is_damage, salvage
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException, ChannelFullException
from collector_agent.lifecycle import LifecycleState

__all__ = ["FileChannel"]

log = logging.getLogger(__name__)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS batches (seq INTEGER PRIMARY KEY, count INTEGER NOT NULL,"
    " data BLOB NOT NULL, format INTEGER NOT NULL DEFAULT 1)",
    "CREATE TABLE IF NOT EXISTS consumed"
    " (seq INTEGER NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS consumed_seq ON consumed (seq)",
    *GROUPS_SCHEMA,
)
_MIN_SPACE_FLOOR = 1024 * 1024
# a commit rewrites whole pages into the write-ahead log (the tree's leaf, the header), and
# writes each page as a frame of its own: 16 KiB pages measured best for batches of 100 KB
# to 16 MB (4 KiB: frames by the hundred; 64 KiB: 128 KiB rewritten a commit); a database
# made with 64 KiB pages keeps them
_PAGE_SIZE = 16384
_DECODED_CACHE_BYTES = 64 * 1024 * 1024
_SQLITE_FULL = 13

# (sql, rows) pairs a group commit executes in order
_Op = tuple[str, list[tuple[object, ...]]]
# [seq, first, last): events first..last-1 of batch seq
_Range = list[int]


class _DamagedDatabase(ChannelException):
    """SQLite says the file is damaged: the channel salvages it."""


class _DamagedRows(ValueError):
    """Rows SQLite reads without complaint but that cannot be what was written."""


def _malformed(batches: list[tuple[Any, Any]], consumed: list[tuple[Any, Any, Any]]) -> str:
    """Why the replay's rows cannot be trusted ('' if they can)."""
    counts: dict[Any, Any] = {}
    for seq, count in batches:
        if not (isinstance(seq, int) and isinstance(count, int) and count > 0):
            return f"batch row {seq!r} has count {count!r}"
        counts[seq] = count
    previous: tuple[Any, Any] = (None, 0)
    for seq, first, last in consumed:  # in (seq, first) order
        sound = isinstance(first, int) and isinstance(last, int) and 0 <= first < last
        if not sound or last > counts.get(seq, last) or (seq == previous[0] and first < previous[1]):
            return f"consumed range {first!r}..{last!r} of batch {seq!r}"
        previous = (seq, last)
    return ""


class _Ticket:
    __slots__ = ("done", "epoch", "error", "ops")

    def __init__(self, ops: list[_Op], epoch: int) -> None:
        self.ops = ops
        self.epoch = epoch
        self.done = False
        self.error: ChannelException | None = None


class _FileTransaction(Transaction):
    channel: FileChannel

    def __init__(self, channel: FileChannel) -> None:
        super().__init__(channel)
        self._epoch = channel._epoch  # a salvage starts a new epoch: older transactions fail
        self._puts: list[Event] = []
        self._put_seq: int | None = None
        self._grouped = False
        self._takes: list[_Range] = []
        self._taken = 0  # events of the taken ranges, damaged ones included
        self._delivered = 0

    def _do_put(self, events: Sequence[Event]) -> None:
        channel = self.channel
        channel._check_usable(self._epoch)
        channel._reserve(len(events))
        self._puts.extend(events)

    def _do_take(self, limit: int) -> list[Event]:
        self.channel._check_usable(self._epoch)
        ranges, events = self.channel._take(limit, self._epoch)
        self._takes.extend(ranges)
        self._taken += sum(last - first for _, first, last in ranges)
        self._delivered += len(events)
        return events

    def _do_prepare(self, group: PutGroup | None) -> None:
        if self._puts:
            self.channel._check_usable(self._epoch)
            self._put_seq = self.channel._write_batch(self._puts, self._epoch, group)
            self._grouped = group is not None

    def _do_decide(self) -> None:
        if self._put_seq is not None and self._grouped:
            self.channel._check_usable(self._epoch)
            self.channel._decide(self._put_seq, self._epoch)

    def _do_commit(self) -> None:
        channel = self.channel
        channel._check_usable(self._epoch)
        if self._takes:
            channel._consume(self._takes, self._taken, self._epoch)
            channel._release(self._taken, self._epoch)
            channel.counters.add("EventTakeSuccessCount", self._delivered)
        else:
            channel._retry_unrecorded(self._epoch)
        if self._put_seq is not None:
            channel._publish(self._put_seq, len(self._puts), self._epoch)
            channel.counters.add("EventPutSuccessCount", len(self._puts))
        self._reset()

    def _do_rollback(self) -> None:
        channel = self.channel
        if self._epoch != channel._epoch:
            # a salvage replayed the channel from disk since: none of this is held any more
            self._reset()
            return
        if self._put_seq is not None:
            # if it cannot be deleted now, it is retried; a crash meanwhile duplicates it
            rows: list[tuple[object, ...]] = [(self._put_seq,)]
            channel._record(
                [("DELETE FROM batches WHERE seq = ?", rows), ("DELETE FROM groups WHERE seq = ?", rows)],
                0,
                self._epoch,
            )
        if self._puts:
            channel._release(len(self._puts), self._epoch)
        if self._takes:
            channel._untake(self._takes, self._epoch)
        self._reset()

    def _reset(self) -> None:
        self._puts, self._put_seq, self._takes, self._taken, self._delivered = [], None, [], 0, 0
        self._grouped = False


class FileChannel(BasicChannel):
    """See the module doc for keys and semantics."""

    counter_names = (
        *BasicChannel.counter_names,
        "EventPutErrorCount",
        "EventTakeErrorCount",
        "EventDamagedCount",
        "ChannelSalvageCount",
        "EventSalvagedCount",
        "BatchUnreadableCount",
        "UnrecordedTakeCount",
        "EventUndoneCount",
        "CheckpointErrorCount",
        "Unhealthy",
    )

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.directory = Path("artimon-data") / "channels" / name
        self.dead_letter_dir = Path("artimon-data") / "dead-letter"
        self._capacity = 1_000_000
        self.transaction_capacity = 10_000
        self.minimum_required_space = 500 * 1024 * 1024
        self.keep_alive = 3.0
        self.fsync = True
        self._lock = threading.Condition()
        self._queue: deque[_Range] = deque()  # visible events, as ranges of batches
        self._size = 0
        self._counts: dict[int, int] = {}  # events per stored batch
        self._consumed: dict[int, int] = {}  # events of a batch whose take committed
        self._set_aside: set[tuple[int, int]] = set()  # (seq, index) written as dead letters
        self._used = 0
        self._next_seq = 1
        self._epoch = 0
        self._decoded: OrderedDict[int, list[Stored]] = OrderedDict()
        self._decoded_bytes: dict[int, int] = {}
        self._decoded_total = 0
        self._pending: list[_Ticket] = []
        self._pending_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._unrecorded: list[_Op] = []  # take records a failed write left to retry
        self._unrecorded_events = 0
        self._unrecorded_lock = threading.Lock()
        self._unrecorded_tried = 0.0
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._checkpointer: Checkpointer | None = None
        self._space_lock = threading.Lock()
        self._free = 0  # bytes free at the last look, less what was written since
        self._free_read_at = 0.0
        self._dir_lock: DirectoryLock | None = None
        self._failure = ""
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
        dead_letter_dir = Path(context.get_str("deadLetter.dir", "artimon-data/dead-letter"))
        directory = self._directory_of(context)
        if self._writer is not None and directory != self.directory:
            raise context.error("dataDirs", "cannot move a running channel (give it a new name)")
        super().configure(context)
        with self._lock:
            self.directory = directory
            self.dead_letter_dir = dead_letter_dir
            self._capacity = capacity
            self.transaction_capacity = transaction_capacity
            self.minimum_required_space = max(minimum_space, _MIN_SPACE_FLOOR)
            self.keep_alive = keep_alive
            self.fsync = fsync
            self._lock.notify_all()
        with self._write_lock:
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

    @property
    def database(self) -> Path:
        return self.directory / "channel.db"

    @property
    def durable_id(self) -> str:
        """The database's absolute path: where a peer of a put group finds this channel."""
        return os.path.abspath(self.database)

    # -- lifecycle ---------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.database, isolation_level=None, check_same_thread=False, timeout=30)
        try:
            conn.execute(f"PRAGMA page_size={_PAGE_SIZE}")  # takes effect when the file is created
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

    def _open_database(
        self,
    ) -> tuple[sqlite3.Connection, sqlite3.Connection, list[tuple[int, int]], list[tuple[int, int, int]]]:
        """Writer and reader connections, and what the replay needs."""
        writer = self._connect()
        try:
            for statement in _SCHEMA:
                writer.execute(statement)
            if "format" not in {row[1] for row in writer.execute("PRAGMA table_info(batches)")}:
                # a database from before checksums: its rows keep format 1
                writer.execute("ALTER TABLE batches ADD COLUMN format INTEGER NOT NULL DEFAULT 1")
            resolution = resolve_in_doubt(writer, self.name)
            self.counters.add("EventUndoneCount", resolution.undone_events)
            batches = writer.execute("SELECT seq, count FROM batches ORDER BY seq").fetchall()
            consumed = writer.execute("SELECT seq, first, last FROM consumed ORDER BY seq, first").fetchall()
            malformed = _malformed(batches, consumed)
            if malformed:
                raise _DamagedRows(malformed)
            reader = self._connect()
        except BaseException:
            writer.close()
            raise
        return writer, reader, batches, consumed

    def start(self) -> None:
        if self._writer is not None:
            super().start()
            return
        started = time.monotonic()
        try:
            self._dir_lock = DirectoryLock(self.directory, f"file channel {self.name}").acquire()
            finish_interrupted(self.database)
            try:
                writer, reader, batches, consumed = self._open_database()
            except (sqlite3.DatabaseError, UnicodeDecodeError, _DamagedRows) as exc:
                if not isinstance(exc, _DamagedRows) and not is_damage(exc):
                    raise
                self._salvage(f"cannot be read ({exc})")
                writer, reader, batches, consumed = self._open_database()
        except DirectoryInUseError as exc:
            self._fail(str(exc))
            raise ChannelException(f"channel {self.name}: {exc}") from None
        except (OSError, sqlite3.Error, UnicodeDecodeError, _DamagedRows) as exc:
            self._fail(f"cannot open {self.directory}: {exc}")
            raise ChannelException(f"channel {self.name}: {self._failure}") from None
        self._writer, self._reader = writer, reader
        self._start_checkpointer()
        self._replay(batches, consumed)
        self.replay_seconds = time.monotonic() - started
        self._failure = ""
        self.counters.set("Unhealthy", 0)
        log.info("channel %s: replayed %d events in %.2f s", self.name, self._size, self.replay_seconds)
        super().start()

    def _fail(self, reason: str) -> None:
        """Close everything and stay in ERROR, reporting ``reason`` (the agent retries start)."""
        self._failure = reason
        self._close()
        self.state = LifecycleState.ERROR
        self.counters.set("Unhealthy", 1)
        log.error("channel %s: %s", self.name, reason)

    def _replay(self, batches: list[tuple[int, int]], consumed: list[tuple[int, int, int]]) -> None:
        taken: dict[int, list[tuple[int, int]]] = {}
        for seq, first, last in consumed:
            taken.setdefault(seq, []).append((first, last))
        queue: deque[_Range] = deque()
        counts: dict[int, int] = {}
        done_counts: dict[int, int] = {}
        size = 0
        for seq, count in batches:
            position = 0
            done = 0
            for first, last in taken.get(seq, []):
                if first > position:
                    queue.append([seq, position, first])
                position = max(position, last)
                done += last - first
            if position < count:
                queue.append([seq, position, count])
            counts[seq] = count
            done_counts[seq] = done
            size += count - done
        # a consumed range can outlive its batch (a take's record retried after the batch's
        # delete was written): a new batch must not take that number
        highest = max([seq for seq, _ in batches] + [seq for seq, _, _ in consumed], default=0)
        with self._lock:
            self._queue = queue
            self._counts, self._consumed, self._set_aside = counts, done_counts, set()
            self._size = self._used = size
            self._next_seq = highest + 1
            self._lock.notify_all()  # after a salvage, room may have come back

    def stop(self) -> None:
        super().stop()
        if self._writer is not None:
            self._retry_unrecorded(self._epoch, force=True)
        if self._unrecorded_events:
            log.error(
                "channel %s: %d delivered events are not recorded as taken (disk full?); "
                "they will be delivered again after the restart",
                self.name,
                self._unrecorded_events,
            )
        self._close()

    def checkpoint(self) -> None:
        """Copy SQLite's write-ahead log into ``channel.db`` now (the checkpointer's thread
        does it by itself every 32 MiB committed): for tools and tests that look at the file."""
        if self._checkpointer is not None:
            self._checkpointer.checkpoint()

    def _start_checkpointer(self) -> None:
        checkpointer = Checkpointer(
            self.database, self.name, lambda: self.counters.add("CheckpointErrorCount")
        )
        try:
            checkpointer.start()
        except sqlite3.Error as exc:
            # without it the log would only grow: SQLite checkpoints inside the commits then
            self.counters.add("CheckpointErrorCount")
            log.warning("channel %s: no checkpointer (%s); SQLite checkpoints in the commits", self.name, exc)
            if self._writer is not None:
                self._writer.execute("PRAGMA wal_autocheckpoint=1000")
            return
        self._checkpointer = checkpointer

    def _stop_checkpointer(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
            self._checkpointer = None

    def _close(self) -> None:
        with self._write_lock, self._read_lock:
            self._stop_checkpointer()
            for conn in (self._writer, self._reader):
                if conn is not None:
                    conn.close()
            self._writer = self._reader = None
            self._decoded.clear()
            self._decoded_bytes.clear()
            self._decoded_total = 0
        if self._dir_lock is not None:
            self._dir_lock.release()
            self._dir_lock = None

    def _check_usable(self, epoch: int) -> None:
        if self._writer is None:
            why = self._failure or "stopped"
            raise ChannelException(
                f"channel {self.name} is {'unavailable: ' + why if self._failure else why}"
            )
        if epoch != self._epoch:
            raise ChannelException(
                f"channel {self.name} was salvaged during this transaction: roll it back and retry"
            )

    # -- capacity ----------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self._size

    @property
    def capacity(self) -> int:
        return self._capacity

    def _ensure_space(self, size: int) -> None:
        """Refuse a write of ``size`` bytes that would leave less than minimumRequiredSpace."""
        needed = size + _PAGE_SIZE  # a page of slack for SQLite's rounding and journal
        with self._space_lock:
            now = time.monotonic()
            if now - self._free_read_at >= 1.0 or self._free - needed < self.minimum_required_space:
                try:
                    self._free = shutil.disk_usage(self.directory).free
                except OSError as exc:
                    self.counters.add("EventPutErrorCount")
                    raise ChannelException(
                        f"channel {self.name}: cannot read the free space: {exc}"
                    ) from None
                self._free_read_at = now
            if self._free - needed < self.minimum_required_space:
                self.counters.add("EventPutErrorCount")
                raise ChannelFullException(
                    f"channel {self.name}: {self.directory} has {self._free} bytes free; a batch of "
                    f"{size} bytes would leave less than minimumRequiredSpace {self.minimum_required_space}"
                )
            self._free -= needed

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

    def _release(self, count: int, epoch: int) -> None:
        with self._lock:
            if epoch == self._epoch:  # a salvage counted the room afresh
                self._used -= count
            self._lock.notify_all()

    # -- storage -----------------------------------------------------------------------------

    def _apply(self, ops: list[_Op], epoch: int) -> None:
        """Execute ``ops`` durably, grouped with whatever else is pending."""
        ticket = _Ticket(ops, epoch)
        with self._pending_lock:
            self._pending.append(ticket)
        with self._write_lock:
            if not ticket.done:
                with self._pending_lock:
                    batch, self._pending = self._pending, []
                self._write(batch)
        if ticket.error is not None:
            raise ticket.error

    def _write(self, batch: list[_Ticket]) -> None:
        """Write the tickets of the current epoch in one SQLite transaction (called with the
        write lock held); each ticket gets its outcome."""
        stale = [t for t in batch if t.epoch != self._epoch]
        current = [t for t in batch if t.epoch == self._epoch]
        for ticket in stale:
            ticket.error = ChannelException(f"channel {self.name} was salvaged during this transaction")
            ticket.done = True
        error = self._execute(current)
        for ticket in current:
            ticket.error = error
            ticket.done = True

    def _execute(self, batch: list[_Ticket]) -> ChannelException | None:
        conn = self._writer
        if conn is None:
            return ChannelException(f"channel {self.name} is stopped")
        if not batch:
            return None
        try:
            conn.execute("BEGIN IMMEDIATE")
            for ticket in batch:
                for sql, rows in ticket.ops:
                    conn.executemany(sql, rows)
            conn.execute("COMMIT")
            self.sqlite_commits += 1
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            with contextlib.suppress(sqlite3.Error, UnicodeDecodeError):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            if is_damage(exc):
                return _DamagedDatabase(f"channel {self.name}: write failed: {exc}")
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF == _SQLITE_FULL:
                with self._space_lock:
                    self._free_read_at = 0.0  # look at the disk again before the next put
                return ChannelFullException(f"channel {self.name}: write failed, the disk is full: {exc}")
            return ChannelException(f"channel {self.name}: write failed: {exc}")
        return None

    def _write_batch(self, events: Sequence[Event], epoch: int, group: PutGroup | None) -> int:
        with self._lock:
            seq = self._next_seq
            self._next_seq += 1
        blob = pack_events(events)
        self._ensure_space(len(blob))
        ops: list[_Op] = [
            (
                "INSERT INTO batches (seq, count, format, data) VALUES (?, ?, ?, ?)",
                [(seq, len(events), CHECKSUMMED, blob)],
            )
        ]
        if group is not None:  # undecided until every member is prepared (file_groups.py)
            peers = json.dumps([member for member in group.members if member != self.durable_id])
            ops.append(("INSERT INTO groups (seq, txn, peers) VALUES (?, ?, ?)", [(seq, group.txn, peers)]))
        self._write_ops(ops, epoch)
        self._wrote(len(blob))
        return seq

    def _wrote(self, size: int) -> None:
        """Tell the checkpointer what a commit added to the log: its data, and the pages of
        the tree and the header it rewrote (three, about)."""
        checkpointer = self._checkpointer
        if checkpointer is not None:
            checkpointer.wrote(size + 3 * _PAGE_SIZE)

    def _decide(self, seq: int, epoch: int) -> None:
        """Write down that batch ``seq`` of a put group is kept."""
        self._write_ops([("UPDATE groups SET decided = 1 WHERE seq = ?", [(seq,)])], epoch)

    def _write_ops(self, ops: list[_Op], epoch: int) -> None:
        """A put's durable writes; a damaged database is salvaged and the put refused."""
        try:
            self._apply(ops, epoch)
        except ChannelException as exc:
            self.counters.add("EventPutErrorCount")
            if isinstance(exc, _DamagedDatabase):
                self._recover(epoch, str(exc))
                raise ChannelException(str(exc)) from None
            raise

    def _publish(self, seq: int, count: int, epoch: int) -> None:
        with self._lock:
            if epoch != self._epoch:
                raise ChannelException(f"channel {self.name} was salvaged during this transaction")
            self._counts[seq] = count
            self._consumed[seq] = 0
            self._queue.append([seq, 0, count])
            self._size += count

    # -- takes -------------------------------------------------------------------------------

    def _pop(self, limit: int, epoch: int) -> list[_Range]:
        """Up to ``limit`` events from the head of the queue, as ranges."""
        ranges: list[_Range] = []
        with self._lock:
            if epoch != self._epoch:
                raise ChannelException(f"channel {self.name} was salvaged during this transaction")
            wanted = limit
            while wanted and self._queue:
                seq, first, last = head = self._queue[0]
                if last - first <= wanted:
                    self._queue.popleft()
                    ranges.append(head)
                    wanted -= last - first
                else:
                    ranges.append([seq, first, first + wanted])
                    head[1] = first + wanted
                    wanted = 0
            self._size -= limit - wanted
        return ranges

    def _take(self, limit: int, epoch: int) -> tuple[list[_Range], list[Event]]:
        """Up to ``limit`` sound events (damaged ones are set aside on the way, and their
        ranges returned with the rest so that the commit consumes them)."""
        taken: list[_Range] = []
        events: list[Event] = []
        while len(events) < limit:
            ranges = self._pop(limit - len(events), epoch)
            if not ranges:
                break
            taken.extend(ranges)
            try:
                damaged = self._events_of(ranges, events)
                if damaged:
                    self._set_aside_damaged(damaged)
            except (sqlite3.Error, UnicodeDecodeError, OSError, ChannelException) as exc:
                self._untake(taken, epoch)
                self.counters.add("EventTakeErrorCount")
                if is_damage(exc):
                    self._recover(epoch, f"read failed: {exc}")
                raise ChannelException(f"channel {self.name}: read failed: {exc}") from None
        return taken, events

    def _events_of(self, ranges: list[_Range], events: list[Event]) -> list[tuple[int, int, Damaged]]:
        """Append the sound events of ``ranges`` to ``events``; the damaged ones, returned."""
        loads, add = json.loads, events.append
        parsed: dict[bytes, dict[str, str]] = {}
        damaged: list[tuple[int, int, Damaged]] = []
        for seq, first, last in ranges:
            stored = self._decoded_batch(seq)
            for index, item in enumerate(stored[first:last], first):
                if isinstance(item, Damaged):
                    damaged.append((seq, index, item))
                    continue
                raw_headers, body = item
                headers = parsed.get(raw_headers)
                if headers is None:
                    try:
                        headers = loads(raw_headers)
                    except ValueError:
                        headers = None
                    if not isinstance(headers, dict):  # only where no checksum vouches for it
                        damaged.append(
                            (seq, index, Damaged("headers are not a JSON object", raw_headers + body))
                        )
                        continue
                    parsed[raw_headers] = headers
                add(Event(headers.copy(), body))
        return damaged

    def _decoded_batch(self, seq: int) -> list[Stored]:
        """The events of batch ``seq``, decoded once and cached while the batch is being
        taken piecemeal (at most ``_DECODED_CACHE_BYTES`` of blobs)."""
        with self._read_lock:
            stored = self._decoded.get(seq)
            if stored is not None:
                self._decoded.move_to_end(seq)
                return stored
            conn = self._reader
            count = self._counts.get(seq)
            if conn is None or count is None:
                raise ChannelException(f"channel {self.name} was stopped or salvaged during this take")
            # fetchall ends the statement at once: an open read would hold off the writer
            rows = conn.execute("SELECT format, data FROM batches WHERE seq = ?", (seq,)).fetchall()
            version, data = rows[0] if rows else (None, None)
            if isinstance(version, int) and isinstance(data, bytes):
                stored = unpack_events(data, count, version)
                size = len(data)
            else:
                why = "the batch is missing from the database" if not rows else "the batch row is damaged"
                stored = [Damaged(why, b"")] * count
                size = 0
            self._decoded[seq] = stored
            self._decoded_bytes[seq] = size
            self._decoded_total += size
            while self._decoded_total > _DECODED_CACHE_BYTES and len(self._decoded) > 1:
                self._forget(next(iter(self._decoded)))
            return stored

    def _forget(self, seq: int) -> None:
        """Drop a decoded batch from the cache (called with the read lock held)."""
        if self._decoded.pop(seq, None) is not None:
            self._decoded_total -= self._decoded_bytes.pop(seq)

    def _set_aside_damaged(self, damaged: list[tuple[int, int, Damaged]]) -> None:
        """Write damaged events to the dead-letter file once (a rolled-back take meets them
        again); ``OSError`` if it cannot be written, and then the take fails."""
        with self._lock:
            new = [(seq, index, item) for seq, index, item in damaged if (seq, index) not in self._set_aside]
        if not new:
            return
        now = int(time.time() * 1000)
        self._write_dead_letters(
            {
                "time_ms": now,
                "channel": self.name,
                "batch": seq,
                "event": index,
                "reason": item.reason,
                "stored_base64": base64.b64encode(item.raw).decode(),
            }
            for seq, index, item in new
        )
        with self._lock:
            self._set_aside.update((seq, index) for seq, index, _ in new)
        self.counters.add("EventDamagedCount", len(new))
        log.error(
            "channel %s: %d damaged events set aside in %s (%s)",
            self.name,
            len(new),
            self.dead_letter_dir,
            ", ".join(sorted({item.reason for _, _, item in new})),
        )

    def _write_dead_letters(self, records: Any) -> None:
        self.dead_letter_dir.mkdir(parents=True, exist_ok=True)
        with open(self.dead_letter_dir / f"channel-{self.name}.jsonl", "a", encoding="utf-8") as out:
            for record in records:
                out.write(json.dumps(record) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def _consume(self, ranges: list[_Range], taken: int, epoch: int) -> None:
        """Consume ``ranges`` (delivered): out of the channel now, recorded durably now or,
        if the disk refuses, with a later commit."""
        per_batch: dict[int, int] = {}
        for seq, first, last in ranges:
            per_batch[seq] = per_batch.get(seq, 0) + last - first
        with self._lock:
            if epoch != self._epoch:
                raise ChannelException(f"channel {self.name} was salvaged during this transaction")
            finished = [seq for seq, n in per_batch.items() if self._consumed[seq] + n == self._counts[seq]]
            for seq, n in per_batch.items():
                self._consumed[seq] += n
            for seq in finished:
                del self._counts[seq], self._consumed[seq]
            if self._set_aside and finished:
                done = set(finished)
                self._set_aside = {key for key in self._set_aside if key[0] not in done}
        with self._read_lock:
            for seq in finished:
                self._forget(seq)
        done = set(finished)
        partial = [(seq, first, last) for seq, first, last in ranges if seq not in done]
        ops: list[_Op] = []
        if finished:
            rows = [(seq,) for seq in finished]
            ops.append(("DELETE FROM batches WHERE seq = ?", list(rows)))
            ops.append(("DELETE FROM consumed WHERE seq = ?", list(rows)))
            ops.append(("DELETE FROM groups WHERE seq = ?", list(rows)))
        if partial:
            ops.append(("INSERT INTO consumed (seq, first, last) VALUES (?, ?, ?)", list(partial)))
        self._record(ops, taken, epoch)
        self._wrote(0)

    def _record(self, ops: list[_Op], events: int, epoch: int) -> None:
        """Write ``ops`` (with any left over from failed writes); if that fails, keep them
        for the next try: they describe what already happened."""
        with self._unrecorded_lock:
            ops, self._unrecorded = self._unrecorded + ops, []
            events, self._unrecorded_events = self._unrecorded_events + events, 0
            self._unrecorded_tried = time.monotonic()
        if not ops:
            return
        try:
            self._apply(ops, epoch)
        except ChannelException as exc:
            with self._unrecorded_lock:
                self._unrecorded = ops + self._unrecorded
                self._unrecorded_events += events
                self.counters.set("UnrecordedTakeCount", self._unrecorded_events)
            self.counters.add("EventTakeErrorCount")
            log.warning("channel %s: %d taken events not recorded yet: %s", self.name, events, exc)
            if isinstance(exc, _DamagedDatabase):
                self._recover(epoch, str(exc))
            return
        self.counters.set("UnrecordedTakeCount", 0)

    def _retry_unrecorded(self, epoch: int, force: bool = False) -> None:
        """Retry the records a full disk refused (at most once a second unless ``force``)."""
        if self._unrecorded and (force or time.monotonic() - self._unrecorded_tried >= 1.0):
            self._record([], 0, epoch)

    def _untake(self, ranges: list[_Range], epoch: int) -> None:
        with self._lock:
            if epoch != self._epoch:
                return  # a salvage queued them again from disk
            for taken in reversed(ranges):
                head = self._queue[0] if self._queue else None
                if head is not None and head[0] == taken[0] and head[1] == taken[2]:
                    head[1] = taken[1]  # the rest of the same batch: join them again
                else:
                    self._queue.appendleft(list(taken))
                self._size += taken[2] - taken[1]

    # -- damage ------------------------------------------------------------------------------

    def _salvage(self, reason: str) -> None:
        report = salvage(self.database, _SCHEMA, _PAGE_SIZE)
        self.counters.add("ChannelSalvageCount")
        self.counters.add("EventSalvagedCount", report.events)
        self.counters.add("BatchUnreadableCount", report.unreadable)
        log.error(
            "channel %s: %s %s; salvaged %d batches (%d events waiting, up to batch %d%s) into a "
            "fresh database; %d reads failed among them; the damaged file is %s",
            self.name,
            self.database,
            reason,
            report.batches,
            report.events,
            report.last_seq,
            ", nothing readable after it" if report.damaged_tail else "",
            report.unreadable,
            report.moved_to,
        )

    def _recover(self, epoch: int, reason: str) -> None:
        """Salvage the database while running: transactions of ``epoch`` fail from here on,
        and the events of batches that could not be salvaged are set aside (counted)."""
        with self._write_lock, self._read_lock:
            if epoch != self._epoch or self._writer is None:
                return  # another thread salvaged already, or the channel stopped
            with self._lock:
                waiting = {seq: self._counts[seq] - self._consumed[seq] for seq in self._counts}
                for seq, index in self._set_aside:  # counted once already, when set aside
                    if any(r[0] == seq and r[1] <= index < r[2] for r in self._queue):
                        waiting[seq] -= 1
            self._stop_checkpointer()
            for conn in (self._writer, self._reader):
                if conn is not None:
                    conn.close()
            self._writer = self._reader = None
            self._decoded.clear()
            self._decoded_bytes.clear()
            self._decoded_total = 0
            with self._unrecorded_lock:
                unrecorded, self._unrecorded, self._unrecorded_events = self._unrecorded, [], 0
            try:
                self._salvage(reason)
                writer, reader, batches, consumed = self._open_database()
            except (OSError, sqlite3.Error, UnicodeDecodeError, _DamagedRows) as exc:
                with self._lock:
                    self._epoch += 1
                self._failure = f"salvage of {self.database} failed: {exc}"
                self.state = LifecycleState.ERROR
                self.counters.set("Unhealthy", 1)
                if self._dir_lock is not None:  # the agent's retry of start() takes it again
                    self._dir_lock.release()
                    self._dir_lock = None
                log.error("channel %s: %s", self.name, self._failure)
                return
            if unrecorded:  # takes delivered before the damage: keep them taken
                try:
                    writer.execute("BEGIN IMMEDIATE")
                    for sql, rows in unrecorded:
                        writer.executemany(sql, rows)
                    writer.execute("COMMIT")
                    batches = writer.execute("SELECT seq, count FROM batches ORDER BY seq").fetchall()
                    consumed = writer.execute(
                        "SELECT seq, first, last FROM consumed ORDER BY seq, first"
                    ).fetchall()
                except sqlite3.Error as exc:
                    with contextlib.suppress(sqlite3.Error):
                        writer.execute("ROLLBACK")
                    log.warning("channel %s: taken events not recorded, they come back: %s", self.name, exc)
            self._writer, self._reader = writer, reader
            self._start_checkpointer()
            with self._lock:  # re-entrant: _replay takes it too
                self._epoch += 1
                self._replay(batches, consumed)
            self.counters.set("UnrecordedTakeCount", 0)
        kept = {seq for seq, _ in batches}
        lost = {seq: n for seq, n in waiting.items() if seq not in kept and n > 0}
        if lost:
            self.counters.add("EventDamagedCount", sum(lost.values()))
            now = int(time.time() * 1000)
            try:
                self._write_dead_letters(
                    {"time_ms": now, "channel": self.name, "batch": seq, "events": n, "reason": "unreadable"}
                    for seq, n in lost.items()
                )
            except OSError as exc:
                log.error("channel %s: cannot write the dead-letter file: %s", self.name, exc)
            log.error(
                "channel %s: %d events of %d batches could not be salvaged",
                self.name,
                sum(lost.values()),
                len(lost),
            )
