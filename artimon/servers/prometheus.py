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

__all__ = ["PrometheusServer", "create_blocks"]

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


class PrometheusServer(ServerProcess):
    """One Prometheus process (see the module doc)."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int = 0,
        *,
        config: str = _EMPTY_CONFIG,
        extra_args: tuple[str, ...] = (),
        binary: str | None = None,
    ) -> None:
        self.port = port or free_port()
        self.config = config
        self.extra_args = extra_args
        self.binary = binary or shutil.which("prometheus") or "prometheus"
        super().__init__(
            data_dir,
            f"prometheus on {self.url}",
            "prometheus.log",
            holder=f"prometheus launcher for port {self.port}",
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def tsdb_dir(self) -> Path:
        return self.data_dir / "tsdb"

    def _start(self, timeout: float) -> None:
        self.tsdb_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "prometheus.yml"
        config.write_text(self.config)
        command = [
            self.binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.tsdb_dir}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--storage.tsdb.retention.time=3650d",
            *self.extra_args,
        ]
        self._launch(command, lambda: answers_ok(f"{self.url}/-/ready"), timeout)
