"""Real Prometheus and Alertmanager servers (Debian's ``prometheus`` and
``prometheus-alertmanager``) for tests, benchmarks and the compliance run: the peers
Artimon's Prometheus side is checked against.

``PrometheusServer(data_dir, config).start()`` writes ``config`` (the YAML text of a
``prometheus.yml``) into ``data_dir``, runs ``prometheus`` on it with its TSDB in
``data_dir/tsdb``, listening on a free port of 127.0.0.1, and waits until ``GET /-/ready``
answers 200 (``port`` 0 takes a free one, known before the start: a configuration may name
it, e.g. to scrape the server itself). ``AlertmanagerServer`` does the same with an ``alertmanager.yml``, its
``--storage.path`` and its cluster listener off. ``stop()`` ends a server by its PID
(SIGTERM, then SIGKILL after a grace period). As with :class:`ZooKeeperServer`, the
process dies with the one that launched it and the data directory is held
(``in_use.lock``) from ``start()`` until the server has exited.

Lifecycle: NEW --start()--> RUNNING --stop()--> STOPPED --start()--> RUNNING
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from bookkeeper.process.children import spawn
from bookkeeper.process.dirlock import DirectoryLock
from bookkeeper.testing.processes import terminate
from bookkeeper.testing.zkserver import free_port

__all__ = ["AlertmanagerServer", "PrometheusServer"]


class _ReadyServer:
    """A server binary run on a generated configuration until ``/-/ready`` answers 200."""

    program = ""
    config_name = ""

    def __init__(
        self, data_dir: str | os.PathLike[str], config: str, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.data_dir = Path(data_dir)
        self.config = config
        self.host = host
        self.port = port or free_port(host)
        self.process: subprocess.Popen[bytes] | None = None
        self._lock = DirectoryLock(self.data_dir, f"{self.program} launcher for port {self.port}")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / f"{self.program}.log"

    def arguments(self, config: Path) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 60.0) -> _ReadyServer:
        """Start the server and wait until it is ready; ``RuntimeError`` with its log if not,
        :class:`~bookkeeper.DirectoryInUseError` if another process holds ``data_dir``."""
        if self.process is not None and self.process.poll() is None:
            return self
        binary = shutil.which(self.program)
        if binary is None:
            raise RuntimeError(f"{self.program} is not installed (Debian's package of that name)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        try:
            config = self.data_dir / self.config_name
            config.write_text(self.config)
            with open(self.log_path, "ab") as log_file:
                self.process = spawn(
                    [binary, *self.arguments(config)],
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    pass_fds=[self._lock.fd],
                )
            self._lock.share_with(self.process.pid, f"{self.program} on port {self.port}")
            self._wait_ready(self.process, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{self.program} exited with {process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)  # a starting server offers no event to wait on
        raise RuntimeError(f"{self.program} not ready on {self.url} within {timeout} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM by PID, SIGKILL after ``grace`` seconds; then let the directory go."""
        process, self.process = self.process, None
        try:
            if process is not None and process.poll() is None:
                terminate(process, grace)
        finally:
            self._lock.release()

    def __enter__(self) -> _ReadyServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class PrometheusServer(_ReadyServer):
    """``prometheus`` on ``config``; ``extra_args`` go on its command line (feature flags...)."""

    program = "prometheus"
    config_name = "prometheus.yml"

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        config: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        extra_args: list[str] | None = None,
    ) -> None:
        super().__init__(data_dir, config, host=host, port=port)
        self.extra_args = list(extra_args or [])

    def arguments(self, config: Path) -> list[str]:
        return [
            f"--config.file={config}",
            f"--storage.tsdb.path={self.data_dir / 'tsdb'}",
            f"--web.listen-address={self.host}:{self.port}",
            "--log.level=warn",
            *self.extra_args,
        ]


class AlertmanagerServer(_ReadyServer):
    """``prometheus-alertmanager`` on ``config`` (an ``alertmanager.yml``), clustering off."""

    program = "prometheus-alertmanager"
    config_name = "alertmanager.yml"

    def arguments(self, config: Path) -> list[str]:
        return [
            f"--config.file={config}",
            f"--storage.path={self.data_dir / 'data'}",
            f"--web.listen-address={self.host}:{self.port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ]
