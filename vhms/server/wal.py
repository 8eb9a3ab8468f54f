"""The write-ahead log of ingest batches: a crash of VHMS loses nothing it acknowledged.

The service appends each batch it admits to the log before it answers ``ingest``; with the
``always`` fsync policy the answer waits for the record's fsync, with ``periodic`` for its
write only (the log is then fsynced every ``fsync_period`` seconds). One writer thread
does the writing, so concurrent calls share one write and one fsync (group commit). At
start, after the snapshot is restored, :func:`replay` applies the segments in order; ingest
is idempotent on (series, bucket), so a record the snapshot holds already changes nothing.
At each snapshot the log :meth:`~WriteAheadLog.rotate`\\ s under the store's lock (the next
record starts a new segment) and :meth:`~WriteAheadLog.truncate` deletes the older segments
once the snapshot is durable.

A record carries series by id, and the keys of the series its segment has not named yet,
so every segment replays on its own: a damaged record loses its samples and, for the rest
of its segment, those of the series it named first (counted), never another segment's, and
never a sample given to the wrong series.

Format, limits and every rejection reason: docs/vhms.md, "Write-ahead log".

States of a :class:`WriteAheadLog`: NEW --start()--> OPEN --close()--> CLOSED. ``append``
in CLOSED raises ``WalError``; records appended before ``start`` wait for it. A segment
whose write or fsync failed takes no more records: its records fail (not acknowledged)
and the next append starts a new segment.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import re
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import google_crc32c
import numpy as np

from bookkeeper.ground import fsync_path
from vhms.exceptions import WalError, WalPolicyError
from vhms.server.store import Store

__all__ = [
    "FSYNC_POLICIES",
    "MAX_RECORD",
    "SEGMENT_BYTES",
    "Batch",
    "MalformedRecordError",
    "PendingRecord",
    "ReplayReport",
    "WriteAheadLog",
    "decode_batch",
    "encode_batch",
    "remove_segments",
    "replay",
    "segments",
]

log = logging.getLogger(__name__)

MAGIC = b"VWAL"
KIND_BATCH = 1
MAX_RECORD = 1 << 30  # payload bytes; the service's frames (256 MiB) make records well below it
SEGMENT_BYTES = 64 << 20
FSYNC_POLICIES = ("always", "periodic")

_HEADER = struct.Struct("<4sII")  # magic, payload length, CRC32C of (length, payload)
_LENGTH = struct.Struct("<I")
_BATCH = struct.Struct("<BxxxIII")  # kind, named series, numeric samples, string samples
_SEGMENT_NAME = re.compile(r"\d{8,}")


class MalformedRecordError(WalError, ValueError):
    """A record whose checksum holds but whose content does not decode (says why)."""


@dataclass
class Batch:
    """One ingest batch as a record holds it: the series it names (segment-local ids, the
    store's ids when written, and their keys), then samples by those ids."""

    named_ids: np.ndarray
    named_keys: list[str]
    ids: np.ndarray
    values: np.ndarray
    timestamps: np.ndarray
    string_ids: np.ndarray
    strings: list[str]
    string_timestamps: np.ndarray


def _pack(texts: Sequence[str]) -> tuple[bytes, bytes]:
    """UTF-8 of ``texts`` end to end, and the end offset of each (uint32 LE)."""
    blob = "".join(texts).encode("utf-8", "surrogatepass")
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    if len(blob) != int(lengths.sum()):  # not all ASCII: lengths in bytes, one by one
        lengths = np.fromiter(
            (len(text.encode("utf-8", "surrogatepass")) for text in texts), dtype=np.int64, count=len(texts)
        )
    return blob, np.cumsum(lengths).astype("<u4").tobytes()


def _unpack(blob: bytes, ends: np.ndarray, what: str) -> list[str]:
    if len(ends) and (int(ends[-1]) != len(blob) or (np.diff(ends.astype(np.int64)) < 0).any()):
        raise MalformedRecordError(f"the offsets of its {what} do not fit their {len(blob)} bytes")
    try:
        text = blob.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise MalformedRecordError(f"its {what} are not UTF-8: {exc}") from None
    bounds = [0, *ends.tolist()]
    if len(text) == len(blob):  # ASCII: character offsets are byte offsets
        return [text[bounds[i] : bounds[i + 1]] for i in range(len(ends))]
    try:
        return [blob[bounds[i] : bounds[i + 1]].decode("utf-8", "surrogatepass") for i in range(len(ends))]
    except UnicodeDecodeError as exc:
        raise MalformedRecordError(f"an offset of its {what} splits a character: {exc}") from None


def encode_batch(
    named_ids: np.ndarray,
    named_keys: Sequence[str],
    ids: np.ndarray,
    values: np.ndarray,
    timestamps: np.ndarray,
    string_ids: np.ndarray,
    strings: Sequence[str],
    string_timestamps: np.ndarray,
) -> bytes:
    """One record (header and payload) of a batch; ``WalError`` past :data:`MAX_RECORD`."""
    key_blob, key_ends = _pack(named_keys)
    string_blob, string_ends = _pack(strings)
    parts = [
        _BATCH.pack(KIND_BATCH, len(named_ids), len(ids), len(string_ids)),
        np.asarray(named_ids).astype("<u4").tobytes(),
        np.asarray(ids).astype("<u4").tobytes(),
        np.asarray(string_ids).astype("<u4").tobytes(),
        np.asarray(values, dtype="<f8").tobytes(),
        np.asarray(timestamps, dtype="<i8").tobytes(),
        np.asarray(string_timestamps, dtype="<i8").tobytes(),
        key_ends,
        string_ends,
        key_blob,
        string_blob,
    ]
    length = sum(len(part) for part in parts)
    if length > MAX_RECORD:
        raise WalError(
            f"a batch of {length} bytes exceeds the write-ahead log's record limit of {MAX_RECORD}"
        )
    crc = google_crc32c.value(_LENGTH.pack(length))
    for part in parts:
        crc = google_crc32c.extend(crc, part)
    return b"".join([_HEADER.pack(MAGIC, length, crc), *parts])


def decode_batch(payload: bytes) -> Batch:
    """The batch a record's payload holds; ``MalformedRecordError`` saying why it is not one."""
    if len(payload) < _BATCH.size:
        raise MalformedRecordError(f"a payload of {len(payload)} bytes is shorter than a batch header")
    kind, named, count, string_count = _BATCH.unpack_from(payload)
    if kind != KIND_BATCH:
        raise MalformedRecordError(f"record kind {kind} is unknown (this VHMS reads kind {KIND_BATCH})")
    fixed = _BATCH.size + 8 * named + 20 * count + 16 * string_count
    if fixed > len(payload):
        raise MalformedRecordError(
            f"counts ({named} series, {count} samples, {string_count} strings) need {fixed} bytes, "
            f"the payload has {len(payload)}"
        )
    offset = _BATCH.size

    def column(dtype: str, size: int, items: int) -> np.ndarray:
        nonlocal offset
        array = np.frombuffer(payload, dtype=dtype, count=items, offset=offset)
        offset += size * items
        return array

    named_ids = column("<u4", 4, named)
    ids = column("<u4", 4, count)
    string_ids = column("<u4", 4, string_count)
    values = column("<f8", 8, count)
    timestamps = column("<i8", 8, count)
    string_timestamps = column("<i8", 8, string_count)
    key_ends = column("<u4", 4, named)
    string_ends = column("<u4", 4, string_count)
    key_bytes = int(key_ends[-1]) if named else 0
    string_bytes = int(string_ends[-1]) if string_count else 0
    if offset + key_bytes + string_bytes != len(payload):
        raise MalformedRecordError(
            f"{offset} bytes of columns and {key_bytes + string_bytes} of text do not make its "
            f"{len(payload)} bytes"
        )
    keys = _unpack(payload[offset : offset + key_bytes], key_ends, "keys")
    texts = _unpack(payload[offset + key_bytes :], string_ends, "strings")
    return Batch(named_ids, keys, ids, values, timestamps, string_ids, texts, string_timestamps)


def segments(directory: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """The log's segment files (their number in 8 digits or more) in ``directory``, by number."""
    source = Path(directory)
    if not source.is_dir():
        return []
    found = [(int(path.name), path) for path in source.iterdir() if _SEGMENT_NAME.fullmatch(path.name)]
    return sorted(found)


def remove_segments(directory: str | os.PathLike[str], before: int | None = None) -> int:
    """Delete the segments numbered below ``before`` (every one with ``None``); how many."""
    removed = 0
    for number, path in segments(directory):
        if before is None or number < before:
            path.unlink(missing_ok=True)
            removed += 1
    if removed:
        fsync_path(Path(directory))
    return removed


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


@dataclass
class ReplayReport:
    """What :func:`replay` found: counts of each kind of record, sample and damage."""

    segments: int = 0
    segments_skipped: int = 0
    records: int = 0
    samples: int = 0
    strings: int = 0
    damaged_records: int = 0
    damaged_bytes: int = 0
    malformed_records: int = 0
    torn_bytes: int = 0
    samples_of_unknown_series: int = 0
    next_segment: int = 1

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def replay(store: Store, directory: str | os.PathLike[str], *, first_segment: int = 0) -> ReplayReport:
    """Apply every record of the log in ``directory`` to ``store``, segment by segment in
    order, from ``first_segment`` on (the snapshot restored holds the older ones: a crash
    came before their deletion; they are skipped, ``segments_skipped``). Damage never stops
    it: bad bytes followed by a sound record are skipped (``damaged_records``), bad bytes up
    to a segment's end are a torn tail and cut off the file (``torn_bytes``), a sound
    record that does not decode is skipped (``malformed_records``); each is logged with its
    segment and offset. ``next_segment`` is where the log goes on: after every segment
    found, and never below ``first_segment``, so numbers only grow."""
    report = ReplayReport()
    found = segments(directory)
    for number, path in found:
        if number < first_segment:
            report.segments_skipped += 1
            continue
        _replay_segment(store, path, report, newest=number == found[-1][0])
        report.segments += 1
    report.next_segment = max(found[-1][0] + 1 if found else 1, first_segment)
    if report.records or report.damaged_records or report.torn_bytes:
        log.info("write-ahead log in %s replayed: %s", directory, report.as_dict())
    return report


def _record_at(data: mmap.mmap, position: int, size: int) -> bytes | None:
    """The payload of the sound record at ``position``, else ``None``."""
    if size - position < _HEADER.size:
        return None
    magic, length, crc = _HEADER.unpack_from(data, position)
    start = position + _HEADER.size
    if magic != MAGIC or length > MAX_RECORD or start + length > size:
        return None
    payload = data[start : start + length]
    if google_crc32c.extend(google_crc32c.value(_LENGTH.pack(length)), payload) != crc:
        return None
    return payload


def _next_record(data: mmap.mmap, position: int, size: int) -> int | None:
    """Where the first sound record after ``position`` starts, else ``None``."""
    candidate = data.find(MAGIC, position)
    while candidate >= 0:
        if _record_at(data, candidate, size) is not None:
            return candidate
        candidate = data.find(MAGIC, candidate + 1)
    return None


def _replay_segment(store: Store, path: Path, report: ReplayReport, *, newest: bool) -> None:
    size = path.stat().st_size
    if not size:
        return
    mapping = np.full(0, -1, dtype=np.int64)  # this segment's series ids -> the store's
    cut: int | None = None
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        position = 0
        while position < size:
            payload = _record_at(data, position, size)
            if payload is None:
                following = _next_record(data, position + 1, size)
                if following is None:
                    cut = position
                    break
                report.damaged_records += 1
                report.damaged_bytes += following - position
                log.error(
                    "write-ahead log %s: %d damaged bytes at offset %d skipped (a record lost)",
                    path,
                    following - position,
                    position,
                )
                position = following
                continue
            position += _HEADER.size + len(payload)
            try:
                batch = decode_batch(payload)
            except MalformedRecordError as exc:
                report.malformed_records += 1
                log.error("write-ahead log %s: the record before offset %d skipped: %s", path, position, exc)
                continue
            try:
                mapping = _apply(store, batch, mapping, report)
            except ValueError as exc:  # a key that does not parse: never written by this VHMS
                report.malformed_records += 1
                log.error("write-ahead log %s: the record before offset %d skipped: %s", path, position, exc)
    if cut is not None:
        report.torn_bytes += size - cut
        # the newest segment's tail is what a crash mid-write leaves; an older one's is damage
        level = logging.WARNING if newest else logging.ERROR
        log.log(level, "write-ahead log %s: a torn tail of %d bytes at offset %d cut", path, size - cut, cut)
        os.truncate(path, cut)


def _apply(store: Store, batch: Batch, mapping: np.ndarray, report: ReplayReport) -> np.ndarray:
    if len(batch.named_ids):
        top = int(batch.named_ids.max()) + 1
        if top > len(mapping):
            grown = np.full(max(top, 2 * len(mapping)), -1, dtype=np.int64)
            grown[: len(mapping)] = mapping
            mapping = grown
        mapping[batch.named_ids] = store.index.lookup(batch.named_keys)
    ids = _mapped(mapping, batch.ids)
    strings = _mapped(mapping, batch.string_ids)
    unknown = int((ids < 0).sum() + (strings < 0).sum())
    if unknown:
        report.samples_of_unknown_series += unknown
    known = ids >= 0
    store.apply(ids[known], batch.values[known], batch.timestamps[known])
    if len(strings):
        keep = (strings >= 0).tolist()
        texts = [text for text, kept in zip(batch.strings, keep, strict=True) if kept]
        store.apply_strings(strings[strings >= 0], texts, batch.string_timestamps[strings >= 0])
    report.records += 1
    report.samples += len(batch.ids)
    report.strings += len(batch.string_ids)
    return mapping


def _mapped(mapping: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The store's ids of segment ids (-1 where no record of the segment named them)."""
    wide = ids.astype(np.int64)
    out = np.full(len(wide), -1, dtype=np.int64)
    inside = wide < len(mapping)
    out[inside] = mapping[wide[inside]]
    return out
