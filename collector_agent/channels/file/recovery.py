"""The ``file`` channel's recovery (Flume's ``ReplayHandler``): the database read back at
start, and a damaged one salvaged at start or while the channel runs.

At start (:func:`open_or_salvage`) a salvage a crash interrupted is finished first
(``salvage.py``); the database is opened (created if new, migrated from before checksums),
the batches of put groups a crash left undecided are decided with their peers
(``groups.py``), and the rows the queue is rebuilt from are checked: counts and ranges that
no channel writes (:class:`DamagedRows`) are damage too. A database SQLite reports damaged
is salvaged, and the fresh one opened in its place.

While running (:func:`salvage_while_running`, with the log's write lock and the reader's
lock held), a damaged database is closed and salvaged, the deletes of rolled-back puts a
full disk had deferred are written into the fresh one, and the queue is
rebuilt from it in a new epoch: transactions in flight fail their commit, and their events
come back (at least once). What was waiting in batches that could not be read back is
returned, for the dead-letter file. A salvage that fails leaves the channel closed in a new
epoch, its failure returned.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from typing import Any

from collector_agent.channels.file.damage import is_damage
from collector_agent.channels.file.groups import resolve_in_doubt
from collector_agent.channels.file.log import PAGE_SIZE, SCHEMA, Log, Op
from collector_agent.channels.file.queue import EventQueue
from collector_agent.channels.file.reader import BatchReader
from collector_agent.channels.file.salvage import finish_interrupted, salvage
from collector_agent.counters import CounterGroup

__all__ = ["DamagedRows", "Opened", "open_or_salvage", "salvage_while_running"]

log = logging.getLogger(__name__)

# writer, reader, batches(seq, count), consumed(seq, first, last): what a replay needs
Opened = tuple[sqlite3.Connection, sqlite3.Connection, list[tuple[int, int]], list[tuple[int, int, int]]]


class DamagedRows(ValueError):
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


def _rows(conn: sqlite3.Connection) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    batches = conn.execute("SELECT seq, count FROM batches ORDER BY seq").fetchall()
    consumed = conn.execute("SELECT seq, first, last FROM consumed ORDER BY seq, first").fetchall()
    return batches, consumed


def _open(db: Log, counters: CounterGroup) -> Opened:
    """Writer and reader connections, and what the replay needs."""
    writer = db.connect()
    try:
        for statement in SCHEMA:
            writer.execute(statement)
        if "format" not in {row[1] for row in writer.execute("PRAGMA table_info(batches)")}:
            # a database from before checksums: its rows keep format 1
            writer.execute("ALTER TABLE batches ADD COLUMN format INTEGER NOT NULL DEFAULT 1")
        resolution = resolve_in_doubt(writer, db.name)
        counters.add("EventUndoneCount", resolution.undone_events)
        batches, consumed = _rows(writer)
        malformed = _malformed(batches, consumed)
        if malformed:
            raise DamagedRows(malformed)
        reader = db.connect()
    except BaseException:
        writer.close()
        raise
    return writer, reader, batches, consumed


def _salvage(db: Log, counters: CounterGroup, reason: str) -> None:
    report = salvage(db.database, SCHEMA, PAGE_SIZE)
    counters.add("ChannelSalvageCount")
    counters.add("EventSalvagedCount", report.events)
    counters.add("BatchUnreadableCount", report.unreadable)
    log.error(
        "channel %s: %s %s; salvaged %d batches (%d events waiting, up to batch %d%s) into a "
        "fresh database; %d reads failed among them; the damaged file is %s",
        db.name,
        db.database,
        reason,
        report.batches,
        report.events,
        report.last_seq,
        ", nothing readable after it" if report.damaged_tail else "",
        report.unreadable,
        report.moved_to,
    )


def open_or_salvage(db: Log, counters: CounterGroup) -> Opened:
    """Open ``db.database`` at start, salvaging it first if it is damaged; ``OSError``,
    ``sqlite3.Error``, ``UnicodeDecodeError`` or :class:`DamagedRows` if it cannot be."""
    finish_interrupted(db.database)
    try:
        return _open(db, counters)
    except (sqlite3.DatabaseError, UnicodeDecodeError, DamagedRows) as exc:
        if not isinstance(exc, DamagedRows) and not is_damage(exc):
            raise
        _salvage(db, counters, f"cannot be read ({exc})")
        return _open(db, counters)


def _write_deferred(name: str, opened: Opened, deferred: list[Op]) -> Opened:
    """Delete in the fresh database the rolled-back puts a full disk had left there; if
    that fails, their events come back (at least once)."""
    writer, reader, batches, consumed = opened
    try:
        writer.execute("BEGIN IMMEDIATE")
        for sql, rows in deferred:
            writer.executemany(sql, rows)
        writer.execute("COMMIT")
        batches, consumed = _rows(writer)
    except sqlite3.Error as exc:
        with contextlib.suppress(sqlite3.Error):
            writer.execute("ROLLBACK")
        log.warning("channel %s: rolled-back puts not deleted, they come back: %s", name, exc)
    return writer, reader, batches, consumed


def salvage_while_running(
    db: Log, reader: BatchReader, queue: EventQueue, counters: CounterGroup, reason: str
) -> tuple[dict[int, int], str]:
    """Salvage the open database (the caller holds ``db.write_lock`` and ``reader.lock``):
    the events lost, by batch, and '' or, if the salvage failed, why (the log stays closed)."""
    waiting = queue.waiting()
    db.close()
    reader.clear()
    deferred = db.take_deferred()
    try:
        _salvage(db, counters, reason)
        opened = _open(db, counters)
    except (OSError, sqlite3.Error, UnicodeDecodeError, DamagedRows) as exc:
        queue.new_epoch()
        return {}, f"salvage of {db.database} failed: {exc}"
    if deferred:
        opened = _write_deferred(db.name, opened, deferred)
    writer, reader_conn, batches, consumed = opened
    db.attach(writer, reader_conn)
    queue.replay(batches, consumed, new_epoch=True)
    kept = {seq for seq, _ in batches}
    return {seq: n for seq, n in waiting.items() if seq not in kept and n > 0}, ""
