"""What every server harness shares: a process started on a data directory it holds
(:class:`bookkeeper.process.DirectoryLock`) from ``start()`` until it has exited, stopped
by its PID (SIGTERM, then SIGKILL after a grace period), the tail of its log for errors,
and a context manager. Subclasses write ``_start(timeout)``: their command, then
``_launch`` (spawn it holding the directory, wait until it is ready).

Lifecycle: NEW --start()--> RUNNING --stop()--> STOPPED --start()--> RUNNING
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from bookkeeper.ground import DirectoryLock, spawn, terminate

__all__ = ["ServerProcess", "answers_ok"]


def answers_ok(url: str) -> bool:
    """Whether ``url`` answers 200 within a second (a readiness probe such as ``/-/ready``)."""
    try:
        with urllib.request.urlopen(url, timeout=1.0) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class ServerProcess:
    """A server process holding ``data_dir`` (see the module doc)."""

    def __init__(self, data_dir: str | os.PathLike[str], holder: str) -> None:
        self.data_dir = Path(data_dir)
        self.process: subprocess.Popen[bytes] | None = None
        self._lock = DirectoryLock(self.data_dir, holder)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self, timeout: float = 60.0) -> Self:
        """Start the server and wait until it answers; ``RuntimeError`` with its log if not,
        :class:`~bookkeeper.DirectoryInUseError` if another process holds ``data_dir``."""
        if self.process is not None and self.process.poll() is None:
            return self
        self._lock.acquire()
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        raise NotImplementedError

    def _launch(
        self, command: Sequence[str], log_path: Path, name: str, ready: Callable[[], bool], timeout: float
    ) -> None:
        """Spawn ``command`` (its output appended to ``log_path``; it dies with this process
        and holds the data directory too), then poll ``ready`` until true; ``RuntimeError``
        with the log's tail if it exits or is not ready within ``timeout`` seconds."""
        with open(log_path, "ab") as log_file:
            self.process = spawn(
                list(command),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=[self._lock.fd],
            )
        self._lock.share_with(self.process.pid, name)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with {self.process.returncode}; "
                    f"last lines of {log_path}:\n{self._log_tail(log_path)}"
                )
            if ready():
                return
            time.sleep(0.1)  # polling a starting server: no event to wait on
        raise RuntimeError(
            f"{name} was not ready within {timeout} s; last lines of {log_path}:\n{self._log_tail(log_path)}"
        )

    def _stopped(self) -> None:
        """Called once the process has exited (files to tidy)."""

    @staticmethod
    def _log_tail(path: Path, lines: int = 20) -> str:
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace: float = 10.0) -> None:
        """Stop the server by its PID: SIGTERM, then SIGKILL after ``grace`` seconds; then
        let the data directory go."""
        process, self.process = self.process, None
        try:
            if process is not None and process.poll() is None:
                self._terminate(process, grace)
        finally:
            self._lock.release()

    def _terminate(self, process: subprocess.Popen[bytes], grace: float) -> None:
        terminate(process, grace)
        self._stopped()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
