"""The ``file`` channel's disk space: what a put may still write, its refusal when the disk
is nearly full, and the reserve that keeps the channel's own bookkeeping going when it is.

A put is refused at ``prepare``, before anything is handed on, when writing it would leave
less than ``minimumRequiredSpace`` free (``ChannelFullException``; floor 1 MiB). The free
space is read from the disk at most once a second and lowered by every batch written
since, so a burst cannot overshoot it; a refused put reads the disk again, so puts resume
at the first attempt after space returns.

The reserve: ``<dataDirs>/reserve``, a file of ``reservedSpace`` bytes (floor 1 MiB)
allocated at start (what the file left by the last run holds is kept). When SQLite
refuses a write for a full disk (another process filled it, or a put's batch grew the
database past the estimate), the channel releases the reserve (:meth:`DiskSpace.release`,
the file emptied) and writes its bookkeeping into that room: the records of take commits
and of rollbacks, and the checkpoint that copies SQLite's log into the database and
truncates it (``checkpoint.py``). Puts never get it: while the reserve is short, its
missing bytes count as used, so puts stay refused until the disk has room for the reserve
again, and the first look that finds it (a put's) allocates it again before the put goes
on.

A pre-allocated file rather than only a bound on SQLite's log: the log can be kept small
under pressure, but a full disk still refuses the frames a delete appends and the pages a
checkpoint adds to the database, and a take that cannot be recorded cannot be committed.
The reserve is space no other writer on the disk can take.

"Tight" (:meth:`DiskSpace.tight`): the reserve is short, or the free space at the last look
is less than the minimum plus what the log's file keeps while the channel runs; the log's
file is then kept to :data:`~checkpoint.TIGHT_BYTES` (``checkpoint.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from pathlib import Path

from collector_agent.exceptions import ChannelException, ChannelFullException

__all__ = ["MIN_SPACE_FLOOR", "DiskSpace", "Reserve"]

log = logging.getLogger(__name__)

MIN_SPACE_FLOOR = 1024 * 1024


class Reserve:
    """A file of ``size`` bytes whose blocks the channel holds for its bookkeeping."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self.held = 0  # bytes allocated now

    @property
    def short(self) -> int:
        """Bytes the reserve misses (released, or never allocated)."""
        return self.size - self.held

    def measure(self) -> None:
        """At start: what the file left by the last run holds already."""
        try:
            blocks = os.stat(self.path).st_blocks * 512
        except FileNotFoundError:
            blocks = 0
        self.held = min(self.size, blocks)

    def allocate(self) -> bool:
        """Allocate what the reserve misses; whether all of it is held now (a disk short of
        room may leave part of it allocated, which is kept)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return False
        try:
            if os.fstat(fd).st_size > self.size:  # a smaller reserve than last time
                os.ftruncate(fd, self.size)
            os.posix_fallocate(fd, 0, self.size)
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                self.held = min(self.size, os.fstat(fd).st_blocks * 512)
            os.close(fd)
        self.held = self.size
        return True

    def release(self) -> int:
        """Give the reserve's blocks back to the disk; the bytes released."""
        released, self.held = self.held, 0
        if released:
            with contextlib.suppress(FileNotFoundError):
                os.truncate(self.path, 0)
        return released


class DiskSpace:
    """The free space of the channel's directory, as last read and spent since, and the
    channel's reserve in it."""

    def __init__(self, name: str, directory: Path, slack: int, tight_margin: int) -> None:
        self.name = name
        self.directory = directory
        self.minimum = 500 * 1024 * 1024
        self.reserve = Reserve(directory / "reserve", 4 * 1024 * 1024)
        self._tight_margin = tight_margin  # what the log's file may keep: less free is "tight"
        self._slack = slack  # bytes added to every write: SQLite's rounding and journal
        self._lock = threading.Lock()
        self._free = 0  # bytes free for puts at the last look, less what was written since
        self._read_at = 0.0

    def configure(self, directory: Path, minimum: int, reserve: int) -> None:
        with self._lock:
            self.directory = directory
            self.minimum = max(minimum, MIN_SPACE_FLOOR)
            if reserve != self.reserve.size or self.reserve.path.parent != directory:
                self.reserve.release()
                self.reserve = Reserve(directory / "reserve", max(reserve, MIN_SPACE_FLOOR))
            self._read_at = 0.0

    def open(self) -> None:
        """At start: allocate the reserve if there is room (else the first put that finds
        room does), and read the free space (``OSError`` if it cannot be)."""
        with self._lock:
            self.reserve.measure()
            self._free = self._look()
            self._read_at = time.monotonic()

    def spend(self, size: int) -> None:
        """Count a write of ``size`` bytes, or refuse it if it would leave less than the
        minimum free (``ChannelFullException``; ``ChannelException`` if the free space
        cannot be read)."""
        needed = size + self._slack
        with self._lock:
            now = time.monotonic()
            if now - self._read_at >= 1.0 or self._free - needed < self.minimum:
                try:
                    self._free = self._look()
                except OSError as exc:
                    raise ChannelException(
                        f"channel {self.name}: cannot read the free space: {exc}"
                    ) from None
                self._read_at = now
            if self._free - needed < self.minimum:
                short = f" (its reserve short by {self.reserve.short})" if self.reserve.short else ""
                raise ChannelFullException(
                    f"channel {self.name}: {self.directory} has {self._free} bytes free for puts{short}; "
                    f"a batch of {size} bytes would leave less than minimumRequiredSpace {self.minimum}"
                )
            self._free -= needed

    def _look(self) -> int:
        """The free space for puts now: the disk's free bytes less what the reserve misses,
        allocating the reserve first if the disk has room for it and the minimum."""
        free = shutil.disk_usage(self.directory).free
        short = self.reserve.short
        if short and free - short >= self.minimum:
            if self.reserve.allocate():
                log.info("channel %s: reserve of %d bytes allocated", self.name, self.reserve.size)
            free = shutil.disk_usage(self.directory).free
        return free - self.reserve.short

    def look_again(self) -> None:
        """The disk refused a write: read the free space before the next put."""
        with self._lock:
            self._read_at = 0.0

    def release(self) -> int:
        """The disk refused a write: release the reserve for the channel's bookkeeping (the
        bytes released, 0 if it was released already) and read the disk at the next put."""
        with self._lock:
            self._read_at = 0.0
            released = self.reserve.release()
        if released:
            log.warning("channel %s: the disk is full, reserve of %d bytes released", self.name, released)
        return released

    def tight(self) -> bool:
        """Whether the log should give its blocks back to the disk after each checkpoint."""
        return bool(self.reserve.short) or self._free < self.minimum + self._tight_margin
