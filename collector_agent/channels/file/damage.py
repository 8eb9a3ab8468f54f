"""Damage in the ``file`` channel: what counts as damage, and the set-aside of damaged events.

A damaged byte is never delivered as an event:

- Every event's checksum is verified when it is taken (``format.py``). An event that fails
  (and any event of a batch SQLite can no longer find) is *set aside*: appended to
  ``<deadLetter.dir>/channel-<name>.jsonl`` (fsynced), counted in ``EventDamagedCount``
  (and, when its frame's checksum failed, in ``ChecksumMismatchCount`` too),
  and consumed with the take, which delivers the rest. A rolled-back take meets the same
  events again: they are written once (the queue remembers them).
- A database SQLite reports damaged (:func:`is_damage`), at start or while running, is
  salvaged (``salvage.py``, ``recovery.py``): the events of batches that were held in memory
  but could not be read back are set aside too, one line per batch.

The dead-letter file holds one JSON object per line: for an event ``time_ms``, ``channel``,
``batch``, ``event`` (its index in the batch), ``reason`` and ``stored_base64`` (the bytes
that were stored); for a batch a salvage lost ``time_ms``, ``channel``, ``batch``,
``events`` (how many were waiting) and ``reason`` ``unreadable``.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

from collector_agent.channels.file.format import Damaged
from collector_agent.counters import CounterGroup

__all__ = ["DeadLetters", "is_damage"]

log = logging.getLogger(__name__)

# SQLite's primary result codes that say the disk or the process is in trouble, not the file
_NOT_DAMAGE = {
    3,  # SQLITE_PERM
    5,  # SQLITE_BUSY
    6,  # SQLITE_LOCKED
    7,  # SQLITE_NOMEM
    8,  # SQLITE_READONLY
    9,  # SQLITE_INTERRUPT
    10,  # SQLITE_IOERR
    13,  # SQLITE_FULL
    14,  # SQLITE_CANTOPEN
    23,  # SQLITE_AUTH
}


def is_damage(exc: BaseException) -> bool:
    """Whether ``exc`` says the database file is damaged: corrupt pages, not a database, a
    schema that no longer parses (SQLite's message about it may not even be UTF-8), rather
    than a busy, full, unreadable or read-only disk."""
    if isinstance(exc, UnicodeDecodeError):
        return True
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    return code is None or code & 0xFF not in _NOT_DAMAGE


class DeadLetters:
    """The channel's dead-letter file, and the counting and logging of what goes into it."""

    def __init__(self, name: str, counters: CounterGroup) -> None:
        self.name = name
        self.directory = Path("artimon-data") / "dead-letter"
        self._counters = counters

    def set_aside(self, damaged: list[tuple[int, int, Damaged]]) -> None:
        """Write the damaged events ``(seq, index, item)``; ``OSError`` if they cannot be
        written, and then the take that met them fails."""
        now = int(time.time() * 1000)
        self._write(
            {
                "time_ms": now,
                "channel": self.name,
                "batch": seq,
                "event": index,
                "reason": item.reason,
                "stored_base64": base64.b64encode(item.raw).decode(),
            }
            for seq, index, item in damaged
        )
        self._counters.add("EventDamagedCount", len(damaged))
        mismatched = sum(item.reason == "checksum mismatch" for _, _, item in damaged)
        if mismatched:
            self._counters.add("ChecksumMismatchCount", mismatched)
        log.error(
            "channel %s: %d damaged events set aside in %s (%s)",
            self.name,
            len(damaged),
            self.directory,
            ", ".join(sorted({item.reason for _, _, item in damaged})),
        )

    def lost(self, batches: dict[int, int]) -> None:
        """Count and write down the events of ``batches`` (events waiting, by seq) that a
        salvage could not read back (a failed write is logged: they are gone either way)."""
        self._counters.add("EventDamagedCount", sum(batches.values()))
        now = int(time.time() * 1000)
        try:
            self._write(
                {"time_ms": now, "channel": self.name, "batch": seq, "events": n, "reason": "unreadable"}
                for seq, n in batches.items()
            )
        except OSError as exc:
            log.error("channel %s: cannot write the dead-letter file: %s", self.name, exc)
        log.error(
            "channel %s: %d events of %d batches could not be salvaged",
            self.name,
            sum(batches.values()),
            len(batches),
        )

    def _write(self, records: Iterable[dict[str, object]]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / f"channel-{self.name}.jsonl", "a", encoding="utf-8") as out:
            for record in records:
                out.write(json.dumps(record) + "\n")
            out.flush()
            os.fsync(out.fileno())
