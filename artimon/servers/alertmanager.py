"""A real Prometheus Alertmanager (Debian's ``prometheus-alertmanager``) on a data
directory, for the tests of the ``alertmanager`` notifier and users trying it.

``AlertmanagerServer(data_dir, config).start()`` writes ``config`` (the YAML text of an
``alertmanager.yml``) into ``data_dir``, runs the Alertmanager on it with its
``--storage.path`` in ``data_dir/data``, its web listener on 127.0.0.1 (``port``, a free
one by default) and its cluster listener off, and waits until ``/-/ready`` answers 200.
Like every :class:`~artimon.servers.ServerProcess`, it is stopped by its
PID, dies with its launcher and holds its data directory while it runs.

Lifecycle: NEW --start()--> RUNNING --stop()--> STOPPED --start()--> RUNNING
"""

from __future__ import annotations

import os
import shutil

from artimon.servers.base import ServerProcess, answers_ok, free_port

__all__ = ["AlertmanagerServer"]

_NULL_RECEIVER = 'route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n'


class AlertmanagerServer(ServerProcess):
    """One Alertmanager process (see the module doc); the default ``config`` routes every
    alert to a receiver that sends nothing, so alerts can be read back from its API."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        config: str = _NULL_RECEIVER,
        *,
        port: int = 0,
        binary: str | None = None,
    ) -> None:
        self.port = port or free_port()
        self.config = config
        self.binary = binary or shutil.which("prometheus-alertmanager") or "prometheus-alertmanager"
        super().__init__(
            data_dir,
            f"alertmanager on {self.url}",
            "alertmanager.log",
            holder=f"alertmanager launcher for port {self.port}",
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _start(self, timeout: float) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "alertmanager.yml"
        config.write_text(self.config)
        command = [
            self.binary,
            f"--config.file={config}",
            f"--storage.path={self.data_dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",
        ]
        self._launch(command, lambda: answers_ok(f"{self.url}/-/ready"), timeout)
