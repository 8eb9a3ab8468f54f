"""One live process per data directory: ``<directory>/in_use.lock`` held with ``flock``.

Two servers on one directory corrupt it without a word (six ZooKeeper servers once wrote
one transaction log after six ``kill -9`` of ``artimon up``). The lock is taken when a
process starts using the directory and held for as long as it does: the kernel releases a
``flock`` when the last descriptor of the open file is closed, so a crash, ``kill -9``
included, frees the directory at once, and nothing stale is left to clean up. A child
that writes the directory itself (the ZooKeeper JVM) inherits the descriptor
(:meth:`DirectoryLock.share_with`), so the directory stays held until the launcher and
the child have both exited.

The file holds one line per holding process, ``<pid> <what>``, so that a refused start can
say who holds the directory. Locks are advisory: they keep Artimon's own processes apart,
not an ``rm -rf``.

States: RELEASED --acquire()--> HELD --release()--> RELEASED (a lock can be taken again).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import weakref
from pathlib import Path
from types import TracebackType

from bookkeeper import DirectoryInUseError

__all__ = ["LOCK_FILE", "DirectoryLock"]

LOCK_FILE = "in_use.lock"  # Flume's name for its file channel's lock


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True


class DirectoryLock:
    """The lock of ``directory`` (created if missing); ``what`` says who holds it."""

    def __init__(self, directory: str | os.PathLike[str], what: str) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_FILE
        self.what = what
        self._fd: int | None = None
        self._closer: weakref.finalize[[int], DirectoryLock] | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    @property
    def fd(self) -> int:
        """The locked descriptor, to hand to a child with ``pass_fds``."""
        if self._fd is None:
            raise RuntimeError(f"{self.path} is not held")
        return self._fd

    def acquire(self) -> DirectoryLock:
        """Take the lock, or raise :class:`DirectoryInUseError` naming the holder's PID."""
        if self._fd is not None:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise DirectoryInUseError(
                f"{self.directory} is in use by {self.holders() or 'another process'} "
                f"({self.path} is held): stop it first, or give this one another directory"
            ) from None
        with contextlib.suppress(OSError):  # a full disk: held all the same, only unnamed
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {self.what}\n".encode(), 0)
        self._fd = fd
        # a lock dropped without release() (its owner failed half-way) lets go when collected
        self._closer = weakref.finalize(self, os.close, fd)
        return self

    def share_with(self, pid: int, what: str) -> None:
        """Record that child ``pid``, started with ``pass_fds=[lock.fd]``, holds the lock too."""
        line = f"{pid} {what}\n".encode()
        with contextlib.suppress(OSError):
            os.pwrite(self.fd, line, os.fstat(self.fd).st_size)

    def holders(self) -> str:
        """``pid 123 (what), ...`` from the lock file: the live holders, else every one named."""
        try:
            text = self.path.read_text(errors="replace")
        except OSError:
            return ""
        named: list[tuple[int, str]] = []
        for line in text.splitlines():
            pid, _, what = line.partition(" ")
            if pid.isdigit():
                named.append((int(pid), what))
        live = [(pid, what) for pid, what in named if _alive(pid)] or named
        return ", ".join(f"pid {pid} ({what})" for pid, what in live)

    def release(self) -> None:
        """Let the directory go (closing the descriptor drops the ``flock``, unless a child
        shares it: then this process's line leaves the file and the child holds on)."""
        fd, closer = self._fd, self._closer
        self._fd = self._closer = None
        if fd is None or closer is None:
            return
        me = str(os.getpid())
        with contextlib.suppress(OSError):  # the names only inform a refused start
            text = os.pread(fd, 1 << 16, 0).decode(errors="replace")
            others = "".join(line for line in text.splitlines(keepends=True) if line.partition(" ")[0] != me)
            os.ftruncate(fd, 0)
            os.pwrite(fd, others.encode(), 0)
        closer()

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
