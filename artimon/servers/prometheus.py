"""A real Prometheus server (Debian's ``prometheus``) on a data directory, for the PromQL
cross-check, benchmarks and users comparing Artimon's answers with Prometheus's own.

``PrometheusServer(data_dir).start()`` writes a ``prometheus.yml`` (the ``config`` given, by
default no scrape job), runs ``prometheus`` bound to 127.0.0.1 on its own TSDB directory
and waits until ``/-/ready`` answers 200. :func:`create_blocks` fills a TSDB directory
from an OpenMetrics text file with ``promtool tsdb create-blocks-from openmetrics``, before
the server starts on it. ``stop()`` ends the server by its PID (SIGTERM, then SIGKILL after
a grace period); the process dies with its launcher (:func:`bookkeeper.ground.spawn`) and
holds its data directory (:class:`bookkeeper.ground.DirectoryLock`) while it runs.

Lifecycle: NEW --start()--> RUNNING --stop()--> STOPPED --start()--> RUNNING
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from artimon.servers.base import ServerProcess, answers_ok, free_port

__all__ = ["PrometheusProjectServer", "PrometheusServer", "create_blocks"]

_EMPTY_CONFIG = "global:\n  scrape_interval: 15s\n"


def create_blocks(
    openmetrics: str | os.PathLike[str], tsdb_dir: str | os.PathLike[str], timeout: float = 120.0
) -> None:
    """Write TSDB blocks into ``tsdb_dir`` from an OpenMetrics file (it must end with
    ``# EOF``); ``RuntimeError`` with promtool's output if it refuses the file."""
    promtool = shutil.which("promtool") or "promtool"
    Path(tsdb_dir).mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(tsdb_dir)],
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"promtool refused {openmetrics}: {done.stderr.decode(errors='replace')[-2000:]}")


class PrometheusProjectServer(ServerProcess):
    """A server of the Prometheus project (Prometheus, Alertmanager): ``executable`` on
    127.0.0.1 (``port``, a free one by default), its YAML ``config`` written into
    ``data_dir/<program>.yml``, ready when ``/-/ready`` answers 200; a subclass names its
    ``program`` and adds its ``_arguments()`` (its storage, above all)."""

    program = ""

    def __init__(
        self, data_dir: str | os.PathLike[str], port: int, config: str, binary: str | None, executable: str
    ) -> None:
        self.port = port or free_port()
        self.config = config
        self.binary = binary or shutil.which(executable) or executable
        super().__init__(
            data_dir,
            f"{self.program} on {self.url}",
            f"{self.program}.log",
            holder=f"{self.program} launcher for port {self.port}",
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _arguments(self) -> list[str]:
        raise NotImplementedError

    def _start(self, timeout: float) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / f"{self.program}.yml"
        config.write_text(self.config)
        command = [
            self.binary,
            f"--config.file={config}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            *self._arguments(),
        ]
        self._launch(command, lambda: answers_ok(f"{self.url}/-/ready"), timeout)


class PrometheusServer(PrometheusProjectServer):
    """One Prometheus process (see the module doc)."""

    program = "prometheus"

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int = 0,
        *,
        config: str = _EMPTY_CONFIG,
        extra_args: tuple[str, ...] = (),
        binary: str | None = None,
    ) -> None:
        self.extra_args = extra_args
        super().__init__(data_dir, port, config, binary, "prometheus")

    @property
    def tsdb_dir(self) -> Path:
        return self.data_dir / "tsdb"

    def _arguments(self) -> list[str]:
        self.tsdb_dir.mkdir(parents=True, exist_ok=True)
        return [
            f"--storage.tsdb.path={self.tsdb_dir}",
            "--storage.tsdb.retention.time=3650d",
            *self.extra_args,
        ]
