"""Watches an agent's configuration file and reloads the agent when it changes.

The file is checked every ``interval`` seconds by content (a hash), not only by mtime as
Flume does, so a touch does not restart anything and an edit within the same second is not
missed. The central configuration in ZooKeeper is followed by
:class:`collector_agent.config_follower.ConfigFollower`; the latest change of either wins.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path

from collector_agent.agent import Agent

__all__ = ["ConfigWatcher"]

log = logging.getLogger(__name__)


class ConfigWatcher:
    def __init__(self, agent: Agent, path: Path, *, interval: float = 30.0) -> None:
        self.agent = agent
        self.path = path
        self.interval = interval
        self._digest = self._file_digest()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="config-watcher", daemon=True)

    def _file_digest(self) -> bytes | None:
        try:
            return hashlib.sha256(self.path.read_bytes()).digest()
        except OSError:
            return None

    def start(self) -> None:
        if self.interval > 0:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def check_now(self) -> bool:
        """Reload if the file changed since the last check; ``True`` if a reload happened."""
        digest = self._file_digest()
        if digest is None or digest == self._digest:
            return False
        self._digest = digest
        log.info("configuration %s changed; reloading agent %s", self.path, self.agent.name)
        return self.agent.reload(self.path.read_text(encoding="utf-8"))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check_now()
            except Exception:  # the watcher must outlive any one bad reload
                log.exception("reload of agent %s from %s failed", self.agent.name, self.path)
