"""Salvage of a ``file`` channel database SQLite can no longer read whole.

A truncated ``channel.db`` is refused by SQLite as a whole ("database disk image is
malformed"), its intact first half included. :func:`salvage` reads what it still can, row
by row, into a fresh database, then moves the damaged one aside, as VHMS does with its
snapshots, in an order that a crash at any step does not spoil:

1. ``channel.db.salvage`` is written from the damaged ``channel.db`` (a stale one from an
   interrupted salvage is deleted first) and committed;
2. ``channel.db`` and its write-ahead log become ``channel.db.corrupt-<time>`` (and
   ``channel.db.corrupt-<time>-wal``, so that SQLite still pairs them; a rollback journal
   of a database from before the log, ``-journal``, likewise), its shared-memory index
   ``-shm`` is deleted;
3. ``channel.db.salvage`` becomes ``channel.db``. A start that finds no ``channel.db`` but a
   ``channel.db.salvage`` finishes this step (:func:`finish_interrupted`), first setting
   aside a log the damaged file left (``channel.db-wal``): SQLite would otherwise apply it
   to the fresh database.

Reading goes through SQLite with ``writable_schema`` on (which makes it read a file
shorter than its header says instead of refusing it) one row at a time in key order. When
a row cannot be read, the next keys are tried one by one, up to :data:`PROBE_LIMIT` of them
in a row without a readable one, so a damaged page loses its own rows and not those after
it. Rows are copied as stored: their events' checksums are checked when they are taken. A row
whose format is none the channel writes is unreadable: a row cut by the truncation reads
its last columns, ``format`` among them, as zeros.
Consumed ranges are copied for the batches that were salvaged (those that cannot be read
are lost, and their events delivered again: at least once).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bookkeeper.ground import fsync_path
from collector_agent.channels.file.format import CHECKSUMMED, LEGACY

__all__ = ["PROBE_LIMIT", "SalvageReport", "finish_interrupted", "salvage"]

log = logging.getLogger(__name__)

PROBE_LIMIT = 10_000
_SIDE_FILES = ("-wal", "-journal")  # what SQLite pairs with a database by its name


@dataclass
class SalvageReport:
    """What a salvage kept, and where the damaged file went."""

    moved_to: Path
    batches: int = 0
    events: int = 0
    unreadable: int = 0  # reads that failed between readable rows (damaged rows or pages)
    damaged_tail: bool = False  # reads failed after the last readable row
    last_seq: int = 0


def _readable(
    conn: sqlite3.Connection, table: str, columns: str, key: str, report: SalvageReport
) -> Iterator[Any]:
    """Rows ``(key, *columns)`` of ``table`` in ``key`` order, skipping those that cannot be
    read (counted in ``report.unreadable``; failures after the last readable row only set
    ``report.damaged_tail``: they may be keys that were never there)."""
    after = 0
    failed = 0
    while True:
        try:
            row = conn.execute(
                f"SELECT {key}, {columns} FROM {table} WHERE {key} > ? ORDER BY {key} LIMIT 1", (after,)
            ).fetchone()
        except (sqlite3.DatabaseError, UnicodeDecodeError):
            failed += 1
            row = None
            for probe in range(after + 1, after + 1 + PROBE_LIMIT):
                try:
                    row = conn.execute(
                        f"SELECT {key}, {columns} FROM {table} WHERE {key} = ?", (probe,)
                    ).fetchone()
                except (sqlite3.DatabaseError, UnicodeDecodeError):
                    failed += 1
                    continue
                if row is not None:
                    break
        if row is None:
            report.damaged_tail = report.damaged_tail or failed > 0
            return
        report.unreadable += failed
        failed = 0
        after = int(row[0])
        yield row


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """The columns of ``table`` (none if the schema itself cannot be read)."""
    try:
        return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}
    except (sqlite3.DatabaseError, UnicodeDecodeError):
        return set()


def _open_damaged(path: Path) -> sqlite3.Connection | None:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        conn.execute("PRAGMA writable_schema=ON")  # read a file shorter than its header says
        conn.execute("PRAGMA query_only=ON")
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        conn.close()
        log.error("cannot read %s at all: %s", path, exc)
        return None
    return conn


def finish_interrupted(db: Path) -> bool:
    """Complete step 3 of a salvage a crash interrupted; whether there was one."""
    pending = db.with_name(db.name + ".salvage")
    if db.exists() or not pending.exists():
        return False
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for suffix in _SIDE_FILES:
        left = db.with_name(db.name + suffix)
        if left.exists():  # the damaged database's, whose move a crash interrupted
            left.rename(db.with_name(f"{db.name}.corrupt-{stamp}-unpaired{suffix}"))
    pending.rename(db)
    fsync_path(db.parent)
    return True


def salvage(db: Path, schema: tuple[str, ...], page_size: int) -> SalvageReport:
    """Copy what can be read of ``db`` into a fresh database (created with ``schema``) that
    replaces it; the damaged file is kept beside it. ``OSError`` or ``sqlite3.Error`` if the
    fresh database cannot be written (nothing is moved then)."""
    target = db.with_name(db.name + ".salvage")
    for leftover in (target, *(target.with_name(target.name + suffix) for suffix in _SIDE_FILES)):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
    report = SalvageReport(db.with_name(f"{db.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}"))
    fresh = sqlite3.connect(target, isolation_level=None, timeout=30)
    try:
        fresh.execute(f"PRAGMA page_size={page_size}")
        fresh.execute("PRAGMA journal_mode=DELETE")
        fresh.execute("PRAGMA synchronous=FULL")
        for statement in schema:
            fresh.execute(statement)
        fresh.execute("BEGIN IMMEDIATE")
        source = _open_damaged(db)
        if source is not None:
            try:
                _copy(source, fresh, report)
            finally:
                source.close()
        fresh.execute("COMMIT")
    finally:
        fresh.close()
    fsync_path(target)
    db.rename(report.moved_to)
    for suffix in _SIDE_FILES:
        side = db.with_name(db.name + suffix)
        if side.exists():
            side.rename(report.moved_to.with_name(report.moved_to.name + suffix))
    with contextlib.suppress(FileNotFoundError):
        db.with_name(db.name + "-shm").unlink()  # rebuilt from the log by whoever opens it
    target.rename(db)
    fsync_path(db.parent)
    return report


def _copy(source: sqlite3.Connection, fresh: sqlite3.Connection, report: SalvageReport) -> None:
    columns = _columns(source, "batches")
    if not {"seq", "count", "data"} <= columns:
        report.unreadable += 1
        return
    version = "format" if "format" in columns else str(LEGACY)  # rows from before checksums
    kept: dict[int, int] = {}
    for seq, count, stored_version, data in _readable(
        source, "batches", f"count, {version}, data", "seq", report
    ):
        sound = isinstance(count, int) and count > 0 and stored_version in (LEGACY, CHECKSUMMED)
        if not (sound and isinstance(data, bytes)):
            report.unreadable += 1
            continue
        fresh.execute(
            "INSERT INTO batches (seq, count, format, data) VALUES (?, ?, ?, ?)",
            (seq, count, stored_version, data),
        )
        kept[seq] = count
        report.batches += 1
        report.events += count
        report.last_seq = seq
    if not {"seq", "first", "last"} <= _columns(source, "consumed"):
        return
    ranges: dict[int, list[tuple[int, int]]] = {}
    for _, seq, first, last in _readable(source, "consumed", "seq, first, last", "rowid", report):
        if (
            seq in kept
            and isinstance(first, int)
            and isinstance(last, int)
            and 0 <= first < last <= kept[seq]
        ):
            ranges.setdefault(seq, []).append((first, last))
    for seq, spans in ranges.items():
        end = 0
        for first, last in sorted(spans):
            if first >= end:  # overlapping ranges cannot both be true: keep the first
                fresh.execute("INSERT INTO consumed (seq, first, last) VALUES (?, ?, ?)", (seq, first, last))
                report.events -= last - first
                end = last
