"""The ``file`` channel (Flume's ``FileChannel``): durable. A committed transaction survives
``kill -9`` and power loss; a damaged byte is never delivered as an event.

The channel and where a transaction (``channels/base.py``'s states) stands on disk::

    IDLE --start()--> START --stop()--> STOP --start()--> START
      |  lock the directory, open channel.db (salvaged if damaged), rebuild the queue
      +--start() fails--> ERROR  (Unhealthy 1; puts and takes fail; the agent retries start())
    START --damage met while running--> salvage --> START, a new epoch
                                                \\--> ERROR (the salvage failed)

    put      room reserved (``capacity``, waiting ``keep-alive``)     memory only
    prepare  the puts' batch written (one group commit, one fsync)     on disk, not yet takeable
    decide   a put of a group: the batch written down as kept          on disk
    commit   the batch queued; the takes' consumption recorded         takeable / gone
    rollback a prepared batch deleted; taken events back at the head   as before the transaction

The contract:

- A crash after ``prepare`` replays the prepared events as committed: at least once, never
  lost (a put into several durable channels: once a member has decided it, ``groups.py``).
- A take's events leave at its commit, once it is recorded on disk: a take whose record
  cannot be written fails its commit and its events go back to the head (``log.py``), so
  nothing a sink committed is delivered again, across a restart too.
- A put is refused at ``prepare`` when it would leave less than ``minimumRequiredSpace``
  free (``space.py``), and waits ``keep-alive`` seconds for room in a full channel (``queue.py``).
- A full disk: the channel's bookkeeping (take records, rollbacks, the log's checkpoint and
  truncation) goes on in its reserve (``reservedSpace``, ``space.py``); puts resume at the
  first attempt after the disk has room again, with no restart.
- A damaged event is set aside, a damaged database salvaged (``damage.py``, ``recovery.py``);
  a transaction in flight across a salvage fails, and its events come back.
- A directory serves one channel at a time (``in_use.lock``, held with ``flock``; a second
  is refused naming the holder's PID). A channel in ``ERROR`` fails its puts and takes with
  ``ChannelException`` (sources and sinks back off) until the agent's retry starts it.

Keys (Flume's names where Flume has them):

| key | default | meaning |
|---|---|---|
| ``dataDirs`` | ``artimon-data/channels/<name>`` | directory of ``channel.db`` (the first, if several) |
| ``checkpointDir`` | — | accepted for Flume compatibility, unused: the database is the checkpoint |
| ``capacity`` | 1000000 | events the channel holds (queued, being put, being taken) |
| ``transactionCapacity`` | 10000 | events one transaction may put or take |
| ``minimumRequiredSpace`` | 524288000 | free bytes the disk must keep after a put (floor 1 MiB) |
| ``reservedSpace`` | 4194304 | bytes held in ``<dataDirs>/reserve`` for a full disk (floor 1 MiB) |
| ``keep-alive`` | 3 | seconds a put waits for room before ``ChannelFullException`` |
| ``fsyncPerTransaction`` | true | false trades the last transactions on power loss for speed |
| ``deadLetter.dir`` | ``artimon-data/dead-letter`` | where damaged events are set aside |
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path

from bookkeeper import DirectoryInUseError
from bookkeeper.ground import DirectoryLock
from collector_agent.channels.base import BasicChannel, Transaction
from collector_agent.channels.file.checkpoint import LIMIT_BYTES, TRIGGER_BYTES
from collector_agent.channels.file.damage import DeadLetters
from collector_agent.channels.file.log import PAGE_SIZE, DamagedDatabase, Log, Op
from collector_agent.channels.file.queue import EventQueue
from collector_agent.channels.file.reader import BatchReader
from collector_agent.channels.file.recovery import DamagedRows, open_or_salvage, salvage_while_running
from collector_agent.channels.file.space import DiskSpace
from collector_agent.channels.file.transaction import FileTransaction
from collector_agent.context import Context
from collector_agent.exceptions import ChannelException
from collector_agent.lifecycle import LifecycleState

__all__ = ["FileChannel"]

log = logging.getLogger(__name__)


class FileChannel(BasicChannel):
    """See the module doc; its parts (``log``, ``queue``, ``reader``, ``space``,
    ``dead_letters``) are driven by its transaction (``transaction.py``)."""

    counter_names = (
        *BasicChannel.counter_names,
        "EventPutErrorCount",
        "EventTakeErrorCount",
        "EventDamagedCount",
        "ChannelSalvageCount",
        "EventSalvagedCount",
        "BatchUnreadableCount",
        "ReserveReleaseCount",
        "EventUndoneCount",
        "CheckpointErrorCount",
        "Unhealthy",
    )

    checks_taken = False  # its frames' CRC32C covers the integrity stamp and the body

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.directory = Path("artimon-data") / "channels" / name
        self.transaction_capacity = 10_000
        self.keep_alive = 3.0
        self.queue = EventQueue(name)
        # slack, a page: SQLite's rounding, journal; tight below what the log's file keeps
        self.space = DiskSpace(
            name, self.directory, slack=PAGE_SIZE, tight_margin=LIMIT_BYTES + TRIGGER_BYTES
        )
        self.commit_log = Log(
            name,
            self.counters,
            epoch=lambda: self.queue.epoch,
            on_full=self._disk_full,
            tight=self.space.tight,
        )
        self.take_lock = threading.Lock()  # a take's commit: its batches' counts, then its record
        self.reader = BatchReader(name, self.commit_log, self.queue)
        self.dead_letters = DeadLetters(name, self.counters)
        self._dir_lock: DirectoryLock | None = None
        self.failure = ""  # why the channel is unavailable
        self.replay_seconds = 0.0

    def configure(self, context: Context) -> None:
        capacity = context.get_int("capacity", 1_000_000, minimum=1)
        transaction_capacity = context.get_int("transactionCapacity", 10_000, minimum=1)
        if transaction_capacity > capacity:
            raise context.error("transactionCapacity", f"{transaction_capacity} exceeds capacity {capacity}")
        minimum_space = context.get_int("minimumRequiredSpace", 500 * 1024 * 1024, minimum=0)
        reserved_space = context.get_int("reservedSpace", 4 * 1024 * 1024, minimum=0)
        keep_alive = context.get_float("keep-alive", 3.0, minimum=0.0)
        fsync = context.get_bool("fsyncPerTransaction", True)
        dead_letter_dir = Path(context.get_str("deadLetter.dir", "artimon-data/dead-letter"))
        directory = self._directory_of(context)
        if self.commit_log.writer is not None and directory != self.directory:
            raise context.error("dataDirs", "cannot move a running channel (give it a new name)")
        super().configure(context)
        self.directory = directory
        self.dead_letters.directory = dead_letter_dir
        self.transaction_capacity = transaction_capacity
        self.space.configure(directory, minimum_space, reserved_space)
        self.keep_alive = keep_alive
        self.queue.resize(capacity)
        self.commit_log.set_fsync(fsync)

    def _new_transaction(self) -> Transaction:
        return FileTransaction(self)

    def _directory_of(self, context: Context) -> Path:
        data_dirs = context.get_list("dataDirs", [])
        return (
            Path(data_dirs[0].split(",")[0]) if data_dirs else Path("artimon-data") / "channels" / self.name
        )

    def can_reconfigure(self, context: Context) -> bool:
        """A running file channel cannot move to another directory."""
        return self.commit_log.writer is None or self._directory_of(context) == self.directory

    @property
    def database(self) -> Path:
        return self.directory / "channel.db"

    @property
    def durable_id(self) -> str:
        """The database's absolute path: where a peer of a put group finds this channel."""
        return os.path.abspath(self.database)

    @property
    def sqlite_commits(self) -> int:
        """SQLite transactions committed: fewer than transaction commits when group commit works."""
        return self.commit_log.commits

    @property
    def size(self) -> int:
        return self.queue.size

    @property
    def capacity(self) -> int:
        return self.queue.capacity

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self.commit_log.writer is not None:
            super().start()
            return
        started = time.monotonic()
        self.commit_log.database = self.database
        try:
            self._dir_lock = DirectoryLock(self.directory, f"file channel {self.name}").acquire()
            self.space.open()
            writer, reader, batches, consumed = open_or_salvage(self.commit_log, self.counters)
        except DirectoryInUseError as exc:
            self._fail(str(exc))
            raise ChannelException(f"channel {self.name}: {exc}") from None
        except (OSError, sqlite3.Error, UnicodeDecodeError, DamagedRows) as exc:
            self._fail(f"cannot open {self.directory}: {exc}")
            raise ChannelException(f"channel {self.name}: {self.failure}") from None
        self.commit_log.attach(writer, reader)
        self.queue.replay(batches, consumed)
        self.replay_seconds = time.monotonic() - started
        self.failure = ""
        self.counters.set("Unhealthy", 0)
        log.info("channel %s: replayed %d events in %.2f s", self.name, self.queue.size, self.replay_seconds)
        super().start()

    def stop(self) -> None:
        super().stop()
        if self.commit_log.writer is not None:
            self.retry_deferred(self.queue.epoch, force=True)
        if self.commit_log.retry_due(force=True):
            log.error(
                "channel %s: rolled-back puts are not deleted (disk full?); they will be "
                "delivered after the restart",
                self.name,
            )
        self._close()

    def checkpoint(self) -> None:
        """Copy SQLite's write-ahead log into ``channel.db`` now (the checkpointer's thread
        does it by itself every 16 MiB committed): for tools and tests that look at the file."""
        self.commit_log.checkpoint()

    def _fail(self, reason: str) -> None:
        """Close everything and stay in ERROR, reporting ``reason`` (the agent retries start)."""
        self.failure = reason
        self._close()
        self.state = LifecycleState.ERROR
        self.counters.set("Unhealthy", 1)
        log.error("channel %s: %s", self.name, reason)

    def _close(self) -> None:
        with self.commit_log.write_lock, self.reader.lock:
            self.commit_log.close()
            self.reader.clear()
        if self._dir_lock is not None:  # the agent's retry of start() takes it again
            self._dir_lock.release()
            self._dir_lock = None

    def recover(self, epoch: int, reason: str) -> None:
        """Salvage the database while running (``recovery.py``): transactions of ``epoch``
        fail from here on, and the events of batches that could not be salvaged are set
        aside (counted)."""
        with self.commit_log.write_lock, self.reader.lock:
            if epoch != self.queue.epoch or self.commit_log.writer is None:
                return  # another thread salvaged already, or the channel stopped
            lost, failure = salvage_while_running(
                self.commit_log, self.reader, self.queue, self.counters, reason
            )
            self.failure = failure  # at once: what a transaction that fails now tells
        if failure:
            self._fail(failure)
        elif lost:
            self.dead_letters.lost(lost)

    def retry_deferred(self, epoch: int, force: bool = False) -> None:
        """Retry the deletes a full disk refused (at most once a second unless ``force``)."""
        if self.commit_log.retry_due(force):
            with contextlib.suppress(ChannelException):  # kept for the next try
                self.record([], epoch)

    def record(self, ops: list[Op], epoch: int, keep: bool = False) -> None:
        """Write bookkeeping ``ops`` (``Log.record``), salvaging the database if it is
        damaged; ``ChannelException`` if they are not written (``keep``: kept to retry)."""
        try:
            self.commit_log.record(ops, epoch, keep)
        except DamagedDatabase as exc:
            self.recover(epoch, str(exc))
            raise ChannelException(str(exc)) from None

    def _disk_full(self, essential: bool) -> None:
        """SQLite refused a write for a full disk: read the disk before the next put, and
        for bookkeeping release the reserve."""
        if not essential:
            self.space.look_again()
        elif self.space.release():
            self.counters.add("ReserveReleaseCount")
