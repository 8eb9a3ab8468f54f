"""The ``file`` channel's disk space: what a put may still write, and its refusal when the
disk is nearly full.

A put is refused at ``prepare``, before anything is handed on, when writing it would leave
less than ``minimumRequiredSpace`` free (``ChannelFullException``; floor 1 MiB). The free
space is read from the disk at most once a second and lowered by every batch written
since, so a burst cannot overshoot it; a write SQLite refuses for a full disk makes the next
put read the disk again (:meth:`DiskSpace.look_again`).

A take's commit that cannot be recorded (a full disk) is not undone: its events were
delivered, so they stay out of the channel, and the record is retried with the next commits
(the log's unrecorded takes, ``log.py``).
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from collector_agent.exceptions import ChannelException, ChannelFullException

__all__ = ["MIN_SPACE_FLOOR", "DiskSpace"]

MIN_SPACE_FLOOR = 1024 * 1024


class DiskSpace:
    """The free space of the channel's directory, as last read and spent since."""

    def __init__(self, name: str, directory: Path, slack: int) -> None:
        self.name = name
        self.directory = directory
        self.minimum = 500 * 1024 * 1024
        self._slack = slack  # bytes added to every write: SQLite's rounding and journal
        self._lock = threading.Lock()
        self._free = 0  # bytes free at the last look, less what was written since
        self._read_at = 0.0

    def configure(self, directory: Path, minimum: int) -> None:
        self.directory = directory
        self.minimum = max(minimum, MIN_SPACE_FLOOR)

    def spend(self, size: int) -> None:
        """Count a write of ``size`` bytes, or refuse it if it would leave less than the
        minimum free (``ChannelFullException``; ``ChannelException`` if the free space
        cannot be read)."""
        needed = size + self._slack
        with self._lock:
            now = time.monotonic()
            if now - self._read_at >= 1.0 or self._free - needed < self.minimum:
                try:
                    self._free = shutil.disk_usage(self.directory).free
                except OSError as exc:
                    raise ChannelException(
                        f"channel {self.name}: cannot read the free space: {exc}"
                    ) from None
                self._read_at = now
            if self._free - needed < self.minimum:
                raise ChannelFullException(
                    f"channel {self.name}: {self.directory} has {self._free} bytes free; a batch of "
                    f"{size} bytes would leave less than minimumRequiredSpace {self.minimum}"
                )
            self._free -= needed

    def look_again(self) -> None:
        """The disk refused a write: read the free space before the next put."""
        with self._lock:
            self._read_at = 0.0
