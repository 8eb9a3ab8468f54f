"""The ``file`` channel's checkpointer: copies the pages of SQLite's write-ahead log
(``channel.db-wal``) into ``channel.db`` in a thread of its own.

In WAL mode a commit appends its pages to the log and fsyncs it once, where a rollback
journal costs three fsyncs (the journal twice, the database once): for small transactions
the fsyncs are the whole cost. The price is the checkpoint, which writes every page a
second time; left to SQLite (``wal_autocheckpoint``), it happens inside whichever commit
crosses the threshold. Here it happens beside the committers instead:

- every commit reports the bytes it wrote (:meth:`Checkpointer.wrote`); every
  :data:`TRIGGER_BYTES` the thread wakes and runs a ``PASSIVE`` checkpoint: it copies what
  no reader or writer holds and waits for nobody, so commits go on meanwhile (and keep
  appending to the log, which therefore does not start again from its beginning);
- every :data:`LIMIT_BYTES` the committer runs a ``RESTART`` checkpoint before it returns:
  it waits for the other connections, copies what the thread has not (little, usually) and
  makes the next commit write the log from its start again, so the log stays bounded
  however busy the channel or slow the disk. The log's file keeps its size (the writer's
  ``journal_size_limit`` is :data:`LIMIT_BYTES` + :data:`TRIGGER_BYTES`): a commit that
  overwrites blocks the file already has is one ``fdatasync`` of data, where one that
  grows the file also waits for the file system's journal (a commit of 110 KB, measured:
  0.20 ms overwriting, 0.33 ms growing the file, which ``TRUNCATE`` emptied every time);
- while the disk is tight (``space.py``: the channel's reserve released, or less free than
  the minimum plus what the log's file keeps), the committer runs its ``RESTART`` every
  :data:`TIGHT_BYTES` instead, and the writer cuts the log's file to that size when it
  starts it again (its ``journal_size_limit``, ``log.py``): the file gives its blocks back to
  the disk rather than keeping 80 MiB (on a disk of 20 MiB, the whole disk), and commits
  still overwrite blocks it has. A full disk empties it (``TRUNCATE``, ``log.py``);
- a checkpoint that fails is logged and counted (``CheckpointErrorCount``); the log keeps
  the pages until the next one.

A checkpoint never decides durability: a committed transaction is durable once its frames
are fsynced in the log, and SQLite replays the log at the next open after a crash.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["LIMIT_BYTES", "TIGHT_BYTES", "TRIGGER_BYTES", "Checkpointer", "start_checkpointer"]

log = logging.getLogger(__name__)

TRIGGER_BYTES = 16 * 1024 * 1024
LIMIT_BYTES = 64 * 1024 * 1024
TIGHT_BYTES = 1024 * 1024


class Checkpointer:
    """One per open database: :meth:`start` after the channel's connections are open,
    :meth:`stop` before they close or a salvage moves the file."""

    def __init__(
        self, database: Path, name: str, on_failure: Callable[[], None], tight: Callable[[], bool]
    ) -> None:
        self.database = database
        self.name = name
        self.checkpoints = 0
        self._on_failure = on_failure
        self._tight = tight
        self._pending = 0  # bytes committed since the log was last emptied
        self._since_copy = 0  # bytes committed since the thread was last woken
        self._lock = threading.Lock()  # one checkpoint at a time, and none after stop
        self._wake = threading.Event()
        self._conn: sqlite3.Connection | None = None
        self._thread: threading.Thread | None = None
        self._running = False

    def start(self) -> None:
        """Open its connection (``sqlite3.Error`` if it cannot) and start its thread."""
        self._conn = sqlite3.connect(self.database, isolation_level=None, check_same_thread=False, timeout=30)
        self._running = True
        self._thread = threading.Thread(target=self._run, name=f"checkpoint-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._running = False
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def wrote(self, size: int) -> None:
        """A commit wrote about ``size`` bytes into the log (called after it)."""
        self._pending += size
        self._since_copy += size
        if self._pending >= (TIGHT_BYTES if self._tight() else LIMIT_BYTES):
            self.checkpoint("RESTART")
        elif self._since_copy >= TRIGGER_BYTES:
            self._since_copy = 0
            self._wake.set()

    def checkpoint(self, mode: str = "PASSIVE") -> None:
        """Copy the log into the database now: ``PASSIVE`` what no reader or writer holds,
        ``RESTART`` all of it, waiting for them, and start the log again from its beginning,
        ``TRUNCATE`` as ``RESTART`` and empty the log's file."""
        with self._lock:
            if self._conn is None:
                return
            try:
                ((busy, frames, copied),) = self._conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()
            except sqlite3.Error as exc:
                self._on_failure()
                log.warning("channel %s: checkpoint of %s failed: %s", self.name, self.database, exc)
                return
            self.checkpoints += 1
            # a passive one runs beside commits that keep appending, so only a restart is
            # sure to have started the log again
            if mode != "PASSIVE" and not busy and copied == frames:
                self._pending = 0

    def _run(self) -> None:
        while self._running:
            self._wake.wait()
            self._wake.clear()
            if self._running:
                self.checkpoint()


def start_checkpointer(
    database: Path,
    name: str,
    writer: sqlite3.Connection,
    on_failure: Callable[[], None],
    tight: Callable[[], bool],
) -> Checkpointer | None:
    """A started checkpointer for the database ``writer`` commits to; ``None`` if it cannot
    start (counted as a failure), and then SQLite checkpoints inside the commits."""
    checkpointer = Checkpointer(database, name, on_failure, tight)
    try:
        checkpointer.start()
    except sqlite3.Error as exc:
        # without it the log would only grow
        on_failure()
        log.warning("channel %s: no checkpointer (%s); SQLite checkpoints in the commits", name, exc)
        writer.execute("PRAGMA wal_autocheckpoint=1000")
        return None
    return checkpointer
