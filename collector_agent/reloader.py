"""Watches an agent's configuration (a file, and optionally a znode) and reloads on change.

The file is checked every ``interval`` seconds by content (a hash), not only by mtime as
Flume does, so a touch does not restart anything and an edit within the same second is not
missed. With ``zk_hosts``, ``/artimon/config/agents/<agent>`` is watched as well: each change
of that znode is applied, as each change of the file is; the latest change wins. A znode's
configuration may name registered type aliases only, unless ``allow_remote_classes``
(``artimon agent --allow-remote-classes``): see :func:`collector_agent.registry.resolve`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path

from kazoo.client import KazooClient

from bookkeeper.zk import make_client, resolve_zk
from collector_agent.agent import Agent

__all__ = ["ConfigWatcher"]

log = logging.getLogger(__name__)


class ConfigWatcher:
    def __init__(
        self,
        agent: Agent,
        path: Path | None,
        *,
        interval: float = 30.0,
        zk_hosts: str | None = None,
        allow_remote_classes: bool = False,
    ) -> None:
        self.agent = agent
        self.allow_remote_classes = allow_remote_classes
        self.path = path
        self.interval = interval
        self._digest = self._file_digest()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="config-watcher", daemon=True)
        self._zk: KazooClient | None = None
        self._zk_hosts = zk_hosts

    def _file_digest(self) -> bytes | None:
        if self.path is None:
            return None
        try:
            return hashlib.sha256(self.path.read_bytes()).digest()
        except OSError:
            return None

    def start(self) -> None:
        if self._zk_hosts:
            connect, layout = resolve_zk(self._zk_hosts)
            client = self._zk = make_client(connect)
            client.start_async()
            client.DataWatch(layout.agent_config(self.agent.name), self._on_znode)
        if self.path is not None and self.interval > 0:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()

    def check_now(self) -> bool:
        """Reload if the file changed since the last check; ``True`` if a reload happened."""
        digest = self._file_digest()
        if digest is None or digest == self._digest or self.path is None:
            return False
        self._digest = digest
        log.info("configuration %s changed; reloading agent %s", self.path, self.agent.name)
        return self.agent.reload(self.path.read_text(encoding="utf-8"))

    def _on_znode(self, data: bytes | None, stat: object) -> None:
        if data:
            log.info("configuration znode of agent %s changed; reloading", self.agent.name)
            try:
                self.agent.reload(
                    data.decode("utf-8", errors="replace"), allow_classes=self.allow_remote_classes
                )
            except Exception:
                log.exception("reload of agent %s from its znode failed", self.agent.name)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check_now()
            except Exception:  # the watcher must outlive any one bad reload
                log.exception("reload of agent %s from %s failed", self.agent.name, self.path)
