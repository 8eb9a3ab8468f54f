"""Watches an agent's configuration (a file, and optionally a znode) and reloads on change.

The file is checked every ``interval`` seconds by content (a hash), not only by mtime as
Flume does, so a touch does not restart anything and an edit within the same second is not
missed. With ``zk_hosts``, ``/artimon/config/agents/<agent>`` is watched as well: each change
of that znode is applied, as each change of the file is; the latest change wins. A znode's
configuration may name registered type aliases only, unless ``allow_remote_classes``
(``artimon agent --allow-remote-classes``): see :func:`collector_agent.registry.resolve`.

The znode is trusted as far as ZooKeeper guards it. With the platform's credentials
(``$ARTIMON_ZK_AUTH``..., :mod:`bookkeeper.zk.acl`) the watcher makes ``/config/agents``
private to that identity when it starts (created so, or its ACL replaced if anyone could
write it), and a configuration znode that anyone could write is not applied: its ACL is
replaced, the refusal logged and counted (``refused``), and the next write by the identity
is applied. Without credentials every content is applied, and a warning at start says that
anyone who reaches ZooKeeper can reconfigure the agent.

The znode's worker (its states: WAITING for a change or a connection, READING, APPLYING)
reads on a watch, after each (re)connection, and every ``_ZK_REFRESH`` seconds in case a
watch was lost with a session; each content is applied once (by its modification id).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoAuthError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from bookkeeper import ZkAccessError
from bookkeeper.zk import (
    AUTH_ENV,
    ZkAuth,
    make_client,
    resolve_zk,
    resolve_zk_auth,
    secure_path,
    world_writable,
)
from collector_agent.agent import Agent

__all__ = ["ConfigWatcher"]

log = logging.getLogger(__name__)

_ZK_REFRESH = 10.0  # seconds between reads of the znode besides its watch
_REFUSED_RETRY = 5.0  # seconds between reads ZooKeeper refused for lack of rights


class ConfigWatcher:
    def __init__(
        self,
        agent: Agent,
        path: Path | None,
        *,
        interval: float = 30.0,
        zk_hosts: str | None = None,
        allow_remote_classes: bool = False,
        zk_auth: ZkAuth | str | None = None,
    ) -> None:
        self.agent = agent
        self.allow_remote_classes = allow_remote_classes
        self.path = path
        self.interval = interval
        self.refused = 0  # znode contents not applied: the znode was writable by anyone
        self._digest = self._file_digest()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="config-watcher", daemon=True)
        self._zk: KazooClient | None = None
        self._zk_hosts = zk_hosts
        self._zk_auth = resolve_zk_auth(zk_auth) if zk_hosts else None
        self._zk_changed = threading.Event()
        self._zk_thread = threading.Thread(target=self._zk_run, name="config-watcher-zk", daemon=True)
        self._secured = False
        self._seen_mzxid: int | None = None
        self._complained: set[str] = set()

    def _file_digest(self) -> bytes | None:
        if self.path is None:
            return None
        try:
            return hashlib.sha256(self.path.read_bytes()).digest()
        except OSError:
            return None

    def start(self) -> None:
        if self._zk_hosts:
            connect, self._layout = resolve_zk(self._zk_hosts)
            self._znode = self._layout.agent_config(self.agent.name)
            if self._zk_auth is None:
                log.warning(
                    "agent %s reads its configuration from %s without ZooKeeper credentials: anyone "
                    "who reaches ZooKeeper can reconfigure it (set %s)",
                    self.agent.name,
                    self._znode,
                    AUTH_ENV,
                )
            self._zk = make_client(connect, auth=self._zk_auth)
            self._zk.add_listener(self._on_state)
            self._zk.start_async()
            self._zk_thread.start()
        if self.path is not None and self.interval > 0:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._zk_changed.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self._zk_thread.is_alive():
            self._zk_thread.join(timeout=10)
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

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check_now()
            except Exception:  # the watcher must outlive any one bad reload
                log.exception("reload of agent %s from %s failed", self.agent.name, self.path)

    # -- the znode ---------------------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        # kazoo's event thread: no blocking call here
        if state == KazooState.CONNECTED:
            self._secured = False  # a new session may follow a change of ACLs: check again
            self._zk_changed.set()

    def _trigger(self, *_: object) -> None:
        self._zk_changed.set()

    def _complain(self, key: str, message: str, *args: object) -> None:
        if key not in self._complained:
            self._complained.add(key)
            log.error(message, *args)

    def _zk_run(self) -> None:
        while not self._stop.is_set():
            self._zk_changed.clear()
            pause = _ZK_REFRESH
            client = self._zk
            if client is not None and client.connected:
                try:
                    self._zk_read(client)
                except (NoAuthError, ZkAccessError) as exc:
                    self._complain(
                        "access",
                        "agent %s: ZooKeeper refuses access to %s (%s); set %s to the platform's credentials",
                        self.agent.name,
                        self._znode,
                        type(exc).__name__,
                        AUTH_ENV,
                    )
                    pause = _REFUSED_RETRY
                except KazooException as exc:
                    log.debug("agent %s: reading %s interrupted: %r", self.agent.name, self._znode, exc)
                    pause = 0.5
            self._zk_changed.wait(pause)

    def _zk_read(self, client: KazooClient) -> None:
        auth = self._zk_auth
        if auth is not None and not self._secured:
            secure_path(client, self._layout.root, auth.acl())
            secure_path(client, self._layout.agent_configs, auth.acl(private=True))
            self._secured = True
        try:
            data, stat = client.get(self._znode, watch=self._trigger)
        except NoNodeError:
            if client.exists(self._znode, watch=self._trigger) is not None:
                self._zk_changed.set()  # created between the two calls
            return
        if stat.mzxid == self._seen_mzxid:
            return
        self._seen_mzxid = stat.mzxid
        if auth is not None and not self._guarded(client, auth, stat):
            return
        if data:
            log.info("configuration znode of agent %s changed; reloading", self.agent.name)
            try:
                self.agent.reload(
                    data.decode("utf-8", errors="replace"), allow_classes=self.allow_remote_classes
                )
            except Exception:  # the watcher must outlive any one bad reload
                log.exception("reload of agent %s from its znode failed", self.agent.name)

    def _guarded(self, client: KazooClient, auth: ZkAuth, stat: ZnodeStat) -> bool:
        """Whether the content just read may be applied: not if anyone could have written it
        (then the znode is made private, and the next write applies)."""
        acls, acl_stat = client.get_acls(self._znode)
        if not world_writable(acls):
            return True
        self.refused += 1
        log.error(
            "agent %s: %s is writable by anyone: its content (version %d) is not applied; its ACL "
            "is made private to %s, write the configuration again",
            self.agent.name,
            self._znode,
            stat.version,
            auth.user,
        )
        try:
            client.set_acls(self._znode, auth.acl(private=True), version=acl_stat.aversion)
        except NoAuthError:
            log.error(
                "agent %s: the ACL of %s may not be changed with these credentials",
                self.agent.name,
                self._znode,
            )
        return False
