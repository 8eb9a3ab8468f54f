"""What keeps Artimon's processes from stepping on each other: child processes that die
with their parent (:func:`spawn`), and one live process per data directory
(:class:`DirectoryLock`, refusing a second one with :class:`DirectoryInUseError`, which
names the holder's PID), and syncing a file or a directory to disk (:func:`fsync_path`)."""

from __future__ import annotations

from bookkeeper.exceptions import DirectoryInUseError
from bookkeeper.process.children import die_with_parent_command, spawn, terminate
from bookkeeper.process.dirlock import LOCK_FILE, DirectoryLock
from bookkeeper.process.files import fsync_path

__all__ = [
    "LOCK_FILE",
    "DirectoryInUseError",
    "DirectoryLock",
    "die_with_parent_command",
    "fsync_path",
    "spawn",
    "terminate",
]
