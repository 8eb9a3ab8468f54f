"""The ``file`` channel: durable. A committed transaction survives ``kill -9`` and power loss.

Storage is one SQLite database (``<dataDirs>/channel.db``), laid out so that the work per
event stays small:

- ``batches(seq, count, data)``: one row per committed put transaction; ``data`` frames its
  events as ``<u32 headers length><u32 body length><headers JSON><body>`` one after another.
- ``consumed(seq, first, last)``: events ``[first, last)`` of batch ``seq`` that takes have
  committed while the rest of the batch is still waiting. A batch whose events are all
  consumed is deleted with its ranges.

A put's ``prepare`` inserts its batch row; a take's ``commit`` records what it consumed.
SQLite's rollback journal (``journal_mode=PERSIST``, ``synchronous=FULL``) makes each commit
atomic and durable; it is chosen over WAL because WAL writes every byte twice (once to the
log, once more at checkpoint), which halved the bandwidth in ``benchmarks/channel_bench.py``,
while a rollback journal only saves the few existing pages a commit changes. Concurrent
committers share one SQLite transaction and so one pair of fsyncs (group commit: whoever
holds the writer lock writes every pending request). On start the channel replays
``batches`` and ``consumed`` (counts and ranges, not the events), so a channel of a million
events is ready in well under a second.

Keys (Flume's names where Flume has them):

| key | default | meaning |
|---|---|---|
| ``dataDirs`` | ``artimon-data/channels/<name>`` | directory of ``channel.db`` (the first, if several) |
| ``checkpointDir`` | — | accepted for Flume compatibility, unused: the database is the checkpoint |
| ``capacity`` | 1000000 | events the channel holds (queued, being put, being taken) |
| ``transactionCapacity`` | 10000 | events one transaction may put or take |
| ``minimumRequiredSpace`` | 524288000 | free bytes the disk must keep; below, puts fail (floor 1 MiB) |
| ``keep-alive`` | 3 | seconds a put waits for room before ``ChannelFullException`` |
| ``fsyncPerTransaction`` | true | false trades the last transactions on power loss for speed |

A crash after ``prepare`` replays the prepared events as committed: at least once, never
lost. A directory serves one channel at a time (``in_use.lock``, held with ``flock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import sqlite3
import struct
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from pathlib import Path

from collector_agent.channels.base import BasicChannel, Transaction
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException, ChannelFullException
from collector_agent.lifecycle import LifecycleState

__all__ = ["FileChannel"]

log = logging.getLogger(__name__)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS batches"
    " (seq INTEGER PRIMARY KEY, count INTEGER NOT NULL, data BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS consumed"
    " (seq INTEGER NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS consumed_seq ON consumed (seq)",
)
_MIN_SPACE_FLOOR = 1024 * 1024
_FRAME = struct.Struct("<II")
_DECODED_CACHE_BYTES = 64 * 1024 * 1024

# (sql, rows) pairs a group commit executes in order
_Op = tuple[str, list[tuple[object, ...]]]
# [seq, first, last): events first..last-1 of batch seq
_Range = list[int]


def _pack_events(events: Sequence[Event]) -> bytes:
    """Frame ``events`` as one blob (headers JSON encoded once per distinct header set)."""
    parts: list[bytes] = []
    encoded: dict[tuple[tuple[str, str], ...], bytes] = {}
    pack = _FRAME.pack
    for event in events:
        key = tuple(event.headers.items())
        headers = encoded.get(key)
        if headers is None:
            headers = encoded[key] = json.dumps(event.headers, separators=(",", ":")).encode()
        parts.append(pack(len(headers), len(event.body)))
        parts.append(headers)
        parts.append(event.body)
    return b"".join(parts)


def _unpack_events(data: bytes, count: int) -> list[tuple[bytes, bytes]]:
    """``(headers JSON, body)`` of the ``count`` events framed in ``data``."""
    view = memoryview(data)
    unpack = _FRAME.unpack_from
    out: list[tuple[bytes, bytes]] = []
    offset = 0
    for _ in range(count):
        header_length, body_length = unpack(view, offset)
        offset += 8
        headers = bytes(view[offset : offset + header_length])
        offset += header_length
        out.append((headers, bytes(view[offset : offset + body_length])))
        offset += body_length
    if offset != len(data):
        raise ValueError(f"batch frames end at {offset}, the blob has {len(data)} bytes")
    return out


class _Ticket:
    __slots__ = ("done", "error", "ops")

    def __init__(self, ops: list[_Op]) -> None:
        self.ops = ops
        self.done = False
        self.error: ChannelException | None = None


class _FileTransaction(Transaction):
    channel: FileChannel

    def __init__(self, channel: FileChannel) -> None:
        super().__init__(channel)
        self._puts: list[Event] = []
        self._put_seq: int | None = None
        self._takes: list[_Range] = []
        self._taken = 0

    def _do_put(self, events: Sequence[Event]) -> None:
        channel = self.channel
        channel._check_disk()
        channel._reserve(len(events))
        self._puts.extend(events)

    def _do_take(self, limit: int) -> list[Event]:
        ranges, events = self.channel._take(limit)
        self._takes.extend(ranges)
        self._taken += len(events)
        return events

    def _do_prepare(self) -> None:
        if self._puts:
            self._put_seq = self.channel._write_batch(self._puts)

    def _do_commit(self) -> None:
        channel = self.channel
        if self._takes:
            channel._consume(self._takes)
            channel._release(self._taken)
            channel.counters.add("EventTakeSuccessCount", self._taken)
        if self._put_seq is not None:
            channel._publish(self._put_seq, len(self._puts))
            channel.counters.add("EventPutSuccessCount", len(self._puts))
        self._reset()

    def _do_rollback(self) -> None:
        channel = self.channel
        if self._put_seq is not None:
            try:
                channel._apply([("DELETE FROM batches WHERE seq = ?", [(self._put_seq,)])])
            except ChannelException as exc:
                # It would come back after a restart: a duplicate, never a loss.
                log.error("channel %s: could not undo a prepared put (%s)", channel.name, exc)
        if self._puts:
            channel._release(len(self._puts))
        if self._takes:
            channel._untake(self._takes)
        self._reset()

    def _reset(self) -> None:
        self._puts, self._put_seq, self._takes, self._taken = [], None, [], 0


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
        self._lock = threading.Condition()
        self._queue: deque[_Range] = deque()  # visible events, as ranges of batches
        self._size = 0
        self._counts: dict[int, int] = {}  # events per stored batch
        self._consumed: dict[int, int] = {}  # events of a batch whose take committed
        self._used = 0
        self._next_seq = 1
        self._decoded: OrderedDict[int, list[tuple[bytes, bytes]]] = OrderedDict()
        self._decoded_bytes: dict[int, int] = {}
        self._decoded_total = 0
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
            with self._write_lock:
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
            self.directory / "channel.db", isolation_level=None, check_same_thread=False, timeout=30
        )
        conn.execute("PRAGMA page_size=65536")  # takes effect when the file is created
        conn.execute("PRAGMA journal_mode=PERSIST")
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
            for statement in _SCHEMA:
                writer.execute(statement)
            reader = self._connect()
            batches = writer.execute("SELECT seq, count FROM batches ORDER BY seq").fetchall()
            consumed = writer.execute("SELECT seq, first, last FROM consumed ORDER BY seq, first").fetchall()
        except (OSError, sqlite3.Error) as exc:
            self.state = LifecycleState.ERROR
            self._unlock_directory()
            raise ChannelException(f"channel {self.name}: cannot open {self.directory}: {exc}") from None
        self._writer, self._reader = writer, reader
        self._replay(batches, consumed)
        self.replay_seconds = time.monotonic() - started
        log.info("channel %s: replayed %d events in %.2f s", self.name, self._size, self.replay_seconds)
        super().start()

    def _replay(self, batches: list[tuple[int, int]], consumed: list[tuple[int, int, int]]) -> None:
        taken: dict[int, list[tuple[int, int]]] = {}
        for seq, first, last in consumed:
            taken.setdefault(seq, []).append((first, last))
        queue: deque[_Range] = deque()
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
            self._counts[seq] = count
            self._consumed[seq] = done
            size += count - done
        with self._lock:
            self._queue = queue
            self._size = self._used = size
            self._next_seq = (batches[-1][0] + 1) if batches else 1

    def stop(self) -> None:
        super().stop()
        with self._write_lock, self._read_lock:
            for conn in (self._writer, self._reader):
                if conn is not None:
                    conn.close()
            self._writer = self._reader = None
            self._decoded.clear()
            self._decoded_bytes.clear()
            self._decoded_total = 0
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
        return self._size

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

    def _apply(self, ops: list[_Op]) -> None:
        """Execute ``ops`` durably, grouped with whatever else is pending."""
        ticket = _Ticket(ops)
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
                for sql, rows in ticket.ops:
                    conn.executemany(sql, rows)
            conn.execute("COMMIT")
            self.sqlite_commits += 1
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            return ChannelException(f"channel {self.name}: write failed: {exc}")
        return None

    def _write_batch(self, events: Sequence[Event]) -> int:
        with self._lock:
            seq = self._next_seq
            self._next_seq += 1
        blob = _pack_events(events)
        try:
            self._apply(
                [("INSERT INTO batches (seq, count, data) VALUES (?, ?, ?)", [(seq, len(events), blob)])]
            )
        except ChannelException:
            self.counters.add("EventPutErrorCount")
            raise
        return seq

    def _publish(self, seq: int, count: int) -> None:
        with self._lock:
            self._counts[seq] = count
            self._consumed[seq] = 0
            self._queue.append([seq, 0, count])
            self._size += count

    def _take(self, limit: int) -> tuple[list[_Range], list[Event]]:
        ranges: list[_Range] = []
        with self._lock:
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
        if not ranges:
            return [], []
        try:
            events = self._events_of(ranges)
        except (sqlite3.Error, ValueError, struct.error) as exc:
            self._untake(ranges)
            self.counters.add("EventTakeErrorCount")
            raise ChannelException(f"channel {self.name}: read failed: {exc}") from None
        return ranges, events

    def _events_of(self, ranges: list[_Range]) -> list[Event]:
        loads = json.loads
        events: list[Event] = []
        parsed: dict[bytes, dict[str, str]] = {}
        for seq, first, last in ranges:
            frames = self._decoded_batch(seq)
            for raw_headers, body in frames[first:last]:
                headers = parsed.get(raw_headers)
                if headers is None:
                    headers = parsed[raw_headers] = loads(raw_headers)
                events.append(Event(dict(headers), body))
        return events

    def _decoded_batch(self, seq: int) -> list[tuple[bytes, bytes]]:
        """The events of batch ``seq``, decoded once and cached while the batch is being
        taken piecemeal (at most ``_DECODED_CACHE_BYTES`` of blobs)."""
        with self._read_lock:
            frames = self._decoded.get(seq)
            if frames is not None:
                self._decoded.move_to_end(seq)
                return frames
            conn = self._reader
            if conn is None:
                raise sqlite3.OperationalError("the channel is stopped")
            # fetchall ends the statement at once: an open read would hold off the writer
            rows = conn.execute("SELECT count, data FROM batches WHERE seq = ?", (seq,)).fetchall()
            if not rows:
                raise sqlite3.DatabaseError(f"committed batch {seq} is missing")
            row = rows[0]
            frames = _unpack_events(row[1], row[0])
            self._decoded[seq] = frames
            self._decoded_bytes[seq] = len(row[1])
            self._decoded_total += len(row[1])
            while self._decoded_total > _DECODED_CACHE_BYTES and len(self._decoded) > 1:
                self._forget(next(iter(self._decoded)))
            return frames

    def _forget(self, seq: int) -> None:
        """Drop a decoded batch from the cache (called with the read lock held)."""
        if self._decoded.pop(seq, None) is not None:
            self._decoded_total -= self._decoded_bytes.pop(seq)

    def _consume(self, ranges: list[_Range]) -> None:
        """Record durably that ``ranges`` were taken; delete batches taken whole."""
        per_batch: dict[int, int] = {}
        for seq, first, last in ranges:
            per_batch[seq] = per_batch.get(seq, 0) + last - first
        finished = [seq for seq, n in per_batch.items() if self._consumed[seq] + n == self._counts[seq]]
        done = set(finished)
        partial = [(seq, first, last) for seq, first, last in ranges if seq not in done]
        ops: list[_Op] = []
        if finished:
            rows = [(seq,) for seq in finished]
            ops.append(("DELETE FROM batches WHERE seq = ?", list(rows)))
            ops.append(("DELETE FROM consumed WHERE seq = ?", list(rows)))
        if partial:
            ops.append(("INSERT INTO consumed (seq, first, last) VALUES (?, ?, ?)", list(partial)))
        try:
            self._apply(ops)
        except ChannelException:
            self.counters.add("EventTakeErrorCount")
            raise
        with self._lock:
            for seq, n in per_batch.items():
                self._consumed[seq] += n
            for seq in finished:
                del self._counts[seq], self._consumed[seq]
        with self._read_lock:
            for seq in finished:
                self._forget(seq)

    def _untake(self, ranges: list[_Range]) -> None:
        with self._lock:
            for taken in reversed(ranges):
                head = self._queue[0] if self._queue else None
                if head is not None and head[0] == taken[0] and head[1] == taken[2]:
                    head[1] = taken[1]  # the rest of the same batch: join them again
                else:
                    self._queue.appendleft(list(taken))
                self._size += taken[2] - taken[1]
