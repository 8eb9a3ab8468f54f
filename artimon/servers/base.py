"""What every launcher shares: a server process started on a data directory it holds
(:class:`bookkeeper.ground.DirectoryLock`) from ``start()`` until it has exited, awaited
until ready (the tail of its log in the error if it exits or is late), stopped by its PID
(SIGTERM, then SIGKILL after a grace period), killed with SIGKILL to simulate a crash,
restarted on the same data, and used as a context manager.

Where a process runs is a :class:`Placement`: the address it binds, the port it takes for a
well-known one, and the command that puts it there. :class:`Local` (this machine's network:
``127.0.0.1``, any free port, the command as it is) is the default; a site's host
(:class:`artimon.site.Host`: its own address, the well-known port, ``ip netns exec <host>``)
is another. Every launcher takes one (``host=``) for each of its processes, and
:meth:`ServerProcess._launch` is the one place a command is put on its host.

:class:`Launcher` is that lifecycle once: ``start()`` takes the directory's lock, runs the
subclass's ``_start(timeout)`` and stops again if it fails; ``restart()``, ``with``, and
``started_in_s`` come with it. A :class:`ServerProcess` subclass names its process and log
file (and PID file, if it keeps one) to ``ServerProcess.__init__`` and writes
``_start(timeout)``: its files, its command, then :meth:`ServerProcess._launch`. A server
of several processes (HDFS's NameNode and DataNode, Kafka's nodes, Spark's master and
worker) is a :class:`ServerGroup` of one ``ServerProcess`` per process; processes that
share one directory share its lock (``lock=``), which the group acquires and releases.
:func:`wait_ready` waits on a readiness that needs several of them.

Lifecycle: NEW --start()--> RUNNING --stop()--> STOPPED --start()--> RUNNING;
RUNNING --kill()--> CRASHED (directory still held) --start()--> RUNNING.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Protocol, Self

from bookkeeper.ground import DirectoryLock, spawn, terminate

__all__ = [
    "LOCAL",
    "Launcher",
    "Local",
    "Placement",
    "ServerGroup",
    "ServerProcess",
    "Where",
    "answers_ok",
    "free_port",
    "placed",
    "placed_each",
    "wait_ready",
]

log = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class Placement(Protocol):
    """Where a server process runs (see the module doc)."""

    @property
    def address(self) -> str:
        """The address its listeners bind, and that others reach it at."""
        ...

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as run on this placement."""
        ...

    def port_for(self, well_known: int) -> int:
        """The port of a listener whose usual port is ``well_known``."""
        ...


@dataclass(frozen=True)
class Local:
    """This machine's own network (see the module doc): ``address``, a free port for every
    listener (several servers share the address), commands run as they are."""

    address: str = "127.0.0.1"

    def command(self, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def port_for(self, well_known: int) -> int:
        return free_port(self.address)


LOCAL = Local()


Where = str | Placement  # an address on this machine's network, or a placement


def placed(where: Where) -> Placement:
    """An address (a :class:`Local` one) or a placement, as a placement."""
    return Local(where) if isinstance(where, str) else where


def placed_each(where: Where | Sequence[Where], count: int) -> list[Placement]:
    """The placements of ``count`` processes: one ``where`` for them all, or one per process."""
    if isinstance(where, str) or not isinstance(where, Sequence):
        return [placed(where)] * count
    if len(where) != count:
        raise ValueError(f"{len(where)} hosts for {count} processes: give one, or one per process")
    return [placed(each) for each in where]


def answers_ok(url: str) -> bool:
    """Whether ``url`` answers 200 within a second (a readiness probe such as ``/-/ready``)."""
    try:
        with urllib.request.urlopen(url, timeout=1.0) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_ready(
    servers: Sequence[ServerProcess], ready: Callable[[], bool], timeout: float, what: str, poll: float = 0.1
) -> None:
    """Poll ``ready`` until true; ``RuntimeError`` with the log's tail of a server of
    ``servers`` that exited meanwhile, or with every log's tail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        for server in servers:
            if server.process is not None and server.process.poll() is not None:
                raise RuntimeError(
                    f"{server.name} exited with {server.process.returncode}; "
                    f"last lines of {server.log_path}:\n{server.log_tail()}"
                )
        if ready():
            return
        if time.monotonic() > deadline:
            tails = "\n".join(f"last lines of {s.log_path}:\n{s.log_tail()}" for s in servers)
            raise RuntimeError(f"{what} was not ready within {timeout} s; {tails}")
        time.sleep(poll)  # polling a starting server: no event to wait on


class Launcher:
    """The lifecycle every launcher shares (see the module doc): a subclass sets ``name`` and
    ``_lock`` (``None`` if its processes hold their own directories) and writes
    ``running``, ``_start(timeout)`` and ``stop(grace)``; ``start_timeout`` and
    ``stop_grace`` are its defaults."""

    start_timeout: ClassVar[float] = 60.0
    stop_grace: ClassVar[float] = 10.0
    name: str
    _lock: DirectoryLock | None
    started_in_s = 0.0  # how long the last start() took, until ready

    @property
    def running(self) -> bool:
        raise NotImplementedError

    def exited(self) -> list[str]:
        """The names of its processes that are not running (all of them before a start)."""
        raise NotImplementedError

    def start(self, timeout: float | None = None) -> Self:
        """Start the server and wait until it answers (not at all with ``timeout=0``: the
        caller waits on something larger); ``RuntimeError`` with its log if not,
        :class:`~bookkeeper.DirectoryInUseError` if another process holds its directory."""
        if self.running:
            return self
        timeout = self.start_timeout if timeout is None else timeout
        started = time.monotonic()
        if self._lock is not None:
            self._lock.acquire()
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        self.started_in_s = time.monotonic() - started
        if timeout:
            log.info("%s ready in %.1f s", self.name, self.started_in_s)
        return self

    def _start(self, timeout: float) -> None:
        raise NotImplementedError

    def stop(self, grace: float | None = None) -> None:
        raise NotImplementedError

    def restart(self, timeout: float | None = None) -> Self:
        """Stop, then start again on the same data directory (and ports)."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class ServerProcess(Launcher):
    """A server process holding ``data_dir`` (see the module doc): ``name`` in errors and in
    the lock file, its output appended to ``data_dir/log_file``, its PID in
    ``data_dir/pid_file`` while it runs; ``holder`` names the launcher in the lock file; with
    ``lock``, one process of several sharing that directory's lock."""

    _lock: DirectoryLock  # its own or its group's: always one

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        name: str,
        log_file: str,
        *,
        pid_file: str | None = None,
        holder: str | None = None,
        lock: DirectoryLock | None = None,
        host: Where = LOCAL,
    ) -> None:
        self.placement = placed(host)
        self.data_dir = Path(data_dir)
        self.name = name
        self.log_path = self.data_dir / log_file
        self.pid_file = self.data_dir / pid_file if pid_file else None
        self.process: subprocess.Popen[bytes] | None = None
        self._owns_lock = lock is None
        self._lock = lock or DirectoryLock(self.data_dir, holder or f"launcher of {name}")

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exited(self) -> list[str]:
        return [] if self.running else [self.name]

    def _launch(
        self,
        command: Sequence[str],
        ready: Callable[[], bool],
        timeout: float,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Spawn ``command`` on its placement (its output appended to ``log_path``; it dies
        with this process and holds the data directory too), then wait until ``ready`` (no
        wait if ``timeout`` is 0: the caller waits on something larger)."""
        with open(self.log_path, "ab") as log_file:
            self.process = spawn(
                self.placement.command(command),
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=[self._lock.fd],
            )
        self._lock.share_with(self.process.pid, self.name)
        if self.pid_file is not None:
            self.pid_file.write_text(f"{self.process.pid}\n")
        if timeout:
            wait_ready([self], ready, timeout, self.name)

    def _stopped(self) -> None:
        """Called once the process has exited: its PID file goes."""
        if self.pid_file is not None:
            self.pid_file.unlink(missing_ok=True)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace: float | None = None) -> None:
        """Stop the server by its PID: SIGTERM, then SIGKILL after ``grace`` seconds; then
        let the data directory go (a shared lock stays with the group of them all)."""
        process, self.process = self.process, None
        try:
            if process is not None:
                if process.poll() is None:
                    terminate(process, self.stop_grace if grace is None else grace)
                self._stopped()
        finally:
            if self._owns_lock:
                self._lock.release()

    def kill(self) -> int:
        """``kill -9`` (a crash, not a shutdown); its PID. The data directory stays held by
        this launcher, so :meth:`start` runs again on the data as the crash left it."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            raise RuntimeError(f"{self.name} is not running")
        process.kill()
        process.wait()
        self._stopped()
        return process.pid


class ServerGroup(Launcher):
    """A server of several :class:`ServerProcess` (see the module doc): a subclass fills
    ``_processes`` in the order they stop and, if they share one directory, ``_lock``.
    It is ``running`` while every process runs, so ``start()`` on a group with a process
    down starts the processes that are not running."""

    _processes: list[ServerProcess]

    @property
    def processes(self) -> list[ServerProcess]:
        """Its processes, in the order they stop."""
        return list(self._processes)

    @property
    def running(self) -> bool:
        return all(process.running for process in self._processes)

    def exited(self) -> list[str]:
        return [process.name for process in self._processes if not process.running]

    def stop(self, grace: float | None = None) -> None:
        """Stop every process by its PID, in order (SIGTERM, SIGKILL after ``grace``
        seconds); then let the shared directory go."""
        grace = self.stop_grace if grace is None else grace
        try:
            for process in self._processes:
                process.stop(grace)
        finally:
            if self._lock is not None:
                self._lock.release()
