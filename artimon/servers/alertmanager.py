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

from artimon.servers.prometheus import PrometheusProjectServer

__all__ = ["AlertmanagerServer"]

_NULL_RECEIVER = 'route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n'


class AlertmanagerServer(PrometheusProjectServer):
    """One Alertmanager process (see the module doc); the default ``config`` routes every
    alert to a receiver that sends nothing, so alerts can be read back from its API."""

    program = "alertmanager"

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        config: str = _NULL_RECEIVER,
        *,
        port: int = 0,
        binary: str | None = None,
    ) -> None:
        super().__init__(data_dir, port, config, binary, "prometheus-alertmanager")

    def _arguments(self) -> list[str]:
        return [f"--storage.path={self.data_dir / 'data'}", "--cluster.listen-address="]
