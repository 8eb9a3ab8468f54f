"""The write-ahead log's writing side (see the package doc): :class:`WriteAheadLog`, whose
one writer thread writes the records queued (group commit) and fsyncs them by its policy.

States of a :class:`WriteAheadLog`: NEW --start()--> OPEN --close()--> CLOSED. ``append``
in CLOSED raises ``WalError``; records appended before ``start`` wait for it. A segment
whose write or fsync failed takes no more records: its records fail (not acknowledged)
and the next append starts a new segment.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bookkeeper.ground import fsync_path
from vhms.exceptions import WalError, WalPolicyError
from vhms.server.wal.record import encode_batch
from vhms.server.wal.segments import SEGMENT_BYTES, remove_segments

__all__ = ["FSYNC_POLICIES", "PendingRecord", "WriteAheadLog"]

log = logging.getLogger(__name__)

FSYNC_POLICIES = ("always", "periodic")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class PendingRecord:
    """A record on its way to the disk, and what became of it."""

    __slots__ = ("data", "done", "error", "segment", "seq")

    def __init__(self, seq: int, segment: int, data: bytes) -> None:
        self.seq = seq
        self.segment = segment
        self.data = data
        self.done = False
        self.error: WalError | None = None


class WriteAheadLog:
    """The log's writing side, in ``directory`` (see the module doc).

    :meth:`append` and :meth:`rotate` are called under the store's lock, in the order the
    batches are applied (that order is the log's); :meth:`wait` after the lock. Segments
    are numbered from ``first_segment`` (the number after the last one a replay read) and
    closed at ``segment_bytes``; ``timeout`` bounds a wait for the disk.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        first_segment: int = 1,
        fsync: str = "always",
        fsync_period: float = 1.0,
        segment_bytes: int = SEGMENT_BYTES,
        timeout: float = 30.0,
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise WalPolicyError(f"fsync policy {fsync!r} is not one of {', '.join(FSYNC_POLICIES)}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.fsync_period = fsync_period
        self.segment_bytes = segment_bytes
        self.timeout = timeout
        self.stats: Counter[str] = Counter()
        # decided under the store's lock, at append: where the next record goes
        self._segment = first_segment
        self._segment_size = 0
        self._named = np.zeros(0, dtype=bool)  # series ids the current segment has named
        self._rotations: dict[int, int] = {}  # segment -> seq of the last record before it
        self._rotated = first_segment
        self._seq = 0
        # shared with the writer thread, under _lock
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._written = threading.Condition(self._lock)
        self._queue: list[PendingRecord] = []
        self._completed = 0
        self._closed = False
        self._failed_segment = 0  # the newest segment a write failed in
        # the writer thread's own
        self._fd = -1
        self._fd_segment = 0
        self._unsynced = False
        self._synced_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="vhms-wal", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Write and fsync what is queued, then refuse appends."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._work.notify()
        if self._thread.is_alive():
            self._thread.join(self.timeout)

    # -- under the store's lock --------------------------------------------------------------

    def append(
        self,
        keys_of: Callable[[np.ndarray], list[str]],
        ids: np.ndarray,
        values: np.ndarray,
        timestamps: np.ndarray,
        string_ids: np.ndarray,
        strings: Sequence[str],
        string_timestamps: np.ndarray,
    ) -> PendingRecord:
        """Queue the record of an admitted batch (series by the store's ids; ``keys_of`` the
        store's keys of ids, asked only for the series the segment has not named yet);
        :meth:`wait` for it before acknowledging the batch."""
        if self._closed:
            raise WalError(f"the write-ahead log in {self.directory} is closed")
        if self._failed_segment >= self._segment or self._segment_size >= self.segment_bytes:
            self._next_segment()
        touched = np.concatenate([ids, string_ids]) if len(string_ids) else ids
        named = np.zeros(0, dtype=np.int64)
        if len(touched):
            top = int(touched.max()) + 1
            if top > len(self._named):
                grown = np.zeros(max(top, 2 * len(self._named)), dtype=bool)
                grown[: len(self._named)] = self._named
                self._named = grown
            named = touched[~self._named[touched]]
            if len(named):
                named = np.unique(named)
        record = encode_batch(
            named,
            keys_of(named) if len(named) else [],
            ids,
            values,
            timestamps,
            string_ids,
            strings,
            string_timestamps,
        )
        self._named[named] = True
        self._segment_size += len(record)
        self._seq += 1
        pending = PendingRecord(self._seq, self._segment, record)
        with self._lock:
            if self._closed:  # closed while this record was encoded: the writer is gone
                raise WalError(f"the write-ahead log in {self.directory} is closed")
            self._queue.append(pending)
            self._work.notify()
        self.stats["records"] += 1
        self.stats["bytes"] += len(record)
        return pending

    def rotate(self) -> int:
        """Send the next record to a new segment; returns its number: every batch applied
        before this call is in an older segment. Called by the snapshot, under the store's
        lock, just before the store's arrays are copied."""
        if self._segment_size or self._failed_segment >= self._segment:
            self._next_segment()
        self._rotated = self._segment
        self._rotations[self._segment] = self._seq
        return self._segment

    def _next_segment(self) -> None:
        self._segment += 1
        self._segment_size = 0
        self._named[:] = False

    # -- after the lock ----------------------------------------------------------------------

    def wait(self, pending: PendingRecord) -> None:
        """Return once ``pending`` is written (``periodic``) or fsynced (``always``);
        ``WalError`` if that failed or took longer than ``timeout``."""
        deadline = time.monotonic() + self.timeout
        with self._lock:
            while not pending.done:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.stats["wait_timeouts"] += 1
                    raise WalError(
                        f"the write-ahead log in {self.directory} did not write a record "
                        f"within {self.timeout} s"
                    )
                self._written.wait(left)
        if pending.error is not None:
            raise pending.error

    def truncate(self) -> int:
        """Delete the segments older than the last :meth:`rotate` (whose batches a durable
        snapshot now holds), once their queued records are written, so that none is created
        again after; returns how many were deleted."""
        before = self._rotated
        last = self._rotations.pop(before, 0)
        for older in [number for number in self._rotations if number < before]:
            del self._rotations[older]
        deadline = time.monotonic() + self.timeout
        with self._lock:
            while self._completed < last and time.monotonic() < deadline and self._thread.is_alive():
                self._written.wait(max(0.0, deadline - time.monotonic()))
        removed = remove_segments(self.directory, before)
        self.stats["segments_deleted"] += removed
        return removed

    # -- the writer thread -------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    if self._unsynced:
                        left = self._synced_at + self.fsync_period - time.monotonic()
                        if left <= 0:
                            break
                        self._work.wait(left)
                    else:
                        self._work.wait()
                batch, self._queue = self._queue, []
                closing = self._closed
            if batch:
                self._write(batch)
            if self._unsynced and (closing or time.monotonic() - self._synced_at >= self.fsync_period):
                self._sync()
            if closing and not batch:
                break
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _write(self, batch: list[PendingRecord]) -> None:
        start = 0
        while start < len(batch):
            segment = batch[start].segment
            end = start
            while end < len(batch) and batch[end].segment == segment:
                end += 1
            group = batch[start:end]
            start = end
            error: WalError | None = None
            if segment <= self._failed_segment:
                error = WalError(f"write-ahead log segment {segment:08d} failed a write before")
            else:
                try:
                    self._open(segment)
                    _write_all(self._fd, b"".join(item.data for item in group))
                    if self.fsync == "always":
                        os.fdatasync(self._fd)
                        self.stats["fsyncs"] += 1
                    else:
                        self._unsynced = True
                    self.stats["groups"] += 1
                except OSError as exc:
                    self.stats["write_errors"] += 1
                    log.error("write-ahead log segment %08d in %s: %s", segment, self.directory, exc)
                    self._failed_segment = segment
                    with contextlib.suppress(OSError):
                        os.close(self._fd)
                    self._fd = -1
                    error = WalError(f"write-ahead log segment {segment:08d} in {self.directory}: {exc}")
            with self._lock:
                for item in group:
                    item.done = True
                    item.error = error
                    item.data = b""
                self._completed = group[-1].seq
                self._written.notify_all()

    def _open(self, segment: int) -> None:
        if self._fd >= 0 and self._fd_segment == segment:
            return
        if self._fd >= 0:
            if self._unsynced:
                self._sync()
            os.close(self._fd)
            self._fd = -1
        self._fd = os.open(self.directory / f"{segment:08d}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._fd_segment = segment
        fsync_path(self.directory)  # the new file's name survives a power loss too
        self.stats["segments_created"] += 1

    def _sync(self) -> None:
        self._synced_at = time.monotonic()
        self._unsynced = False
        if self._fd < 0:
            return
        try:
            os.fdatasync(self._fd)
            self.stats["fsyncs"] += 1
        except OSError as exc:  # acknowledged already (periodic): counted and reported
            self.stats["write_errors"] += 1
            log.error("write-ahead log fsync in %s: %s", self.directory, exc)
            self._failed_segment = self._fd_segment
