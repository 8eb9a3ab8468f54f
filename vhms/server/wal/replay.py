"""The write-ahead log's reading side: :func:`replay` applies every segment to a store at
start, skipping damage (counted in a :class:`ReplayReport`, logged with its offset) and
cutting a torn tail."""

from __future__ import annotations

import logging
import mmap
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from vhms.server.store import Store
from vhms.server.wal.record import (
    HEADER_BYTES,
    Batch,
    MalformedRecordError,
    decode_batch,
    next_record,
    record_at,
)
from vhms.server.wal.segments import segments

__all__ = ["ReplayReport", "replay"]

log = logging.getLogger(__name__)


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


def _replay_segment(store: Store, path: Path, report: ReplayReport, *, newest: bool) -> None:
    size = path.stat().st_size
    if not size:
        return
    mapping = np.full(0, -1, dtype=np.int64)  # this segment's series ids -> the store's
    cut: int | None = None
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        position = 0
        while position < size:
            payload = record_at(data, position, size)
            if payload is None:
                following = next_record(data, position + 1, size)
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
            position += HEADER_BYTES + len(payload)
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
