"""An agent follows its central configuration in ZooKeeper (:mod:`collector_agent.config_store`)
and says what it runs.

The agent follows its own configuration (``/config/agents/<agent-id>``) when that has a
current version, else its group's (``/config/groups/<group>``), else nothing (its file
runs). Each new current version is read and applied with :meth:`Agent.reload` (by
difference: channels keep their events, only what changed restarts); a version it cannot
apply is refused (the running configuration kept, or applied in part when a component
failed to start) and not tried again until the pointer moves. The outcome goes into the
ephemeral ``/config/status/<agent-id>`` (:class:`AgentReport`), which ``artimon config
push`` waits on and rolls back from.

The worker's states (``ConfigFollower.state``)::

    WAITING --a watch fired, a (re)connection, or every `refresh` seconds--> READING
    READING --the pointer names what runs, or names nothing--> REPORTING
    READING --a new version--> APPLYING --applied or refused--> REPORTING
    REPORTING --the report written (created again after a session expiry)--> WAITING

The configuration is trusted as far as ZooKeeper guards it. With credentials
(``$ARTIMON_ZK_AUTH``..., :mod:`bookkeeper.zk.acl`) ``/config`` is made private to the
identity at start, and a version or pointer that anyone could write is not applied: its ACL
is made private, the refusal reported and counted (``refused_unguarded``), and the next
push applies. Without credentials everything is applied, and a warning at start says that
anyone who reaches ZooKeeper can reconfigure the agent. Types must be registered aliases
unless ``allow_remote_classes`` (:func:`collector_agent.registry.resolve`).
"""

from __future__ import annotations

import enum
import logging
import threading
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoAuthError, NodeExistsError, NoNodeError

from bookkeeper import ZkAccessError
from bookkeeper.zk import AUTH_ENV, ZkAuth, make_client, resolve_zk, resolve_zk_auth, world_writable
from collector_agent.agent import Agent
from collector_agent.config_store import MAX_REASON, AgentReport, ConfigStore, ConfigTarget, version_name
from collector_agent.exceptions import CentralConfigError

__all__ = ["ConfigFollower", "FollowerState"]

log = logging.getLogger(__name__)

_REFUSED_RETRY = 5.0  # seconds between reads ZooKeeper refused for lack of rights


class FollowerState(enum.Enum):
    WAITING = "waiting"
    READING = "reading"
    APPLYING = "applying"
    REPORTING = "reporting"


class ConfigFollower:
    """See the module doc. ``agent_id`` defaults to the agent's name; ``group`` ``None``
    follows the agent's own configuration only."""

    def __init__(
        self,
        agent: Agent,
        zk_hosts: str,
        *,
        agent_id: str | None = None,
        group: str | None = None,
        allow_remote_classes: bool = False,
        zk_auth: ZkAuth | str | None = None,
        refresh: float = 10.0,
    ) -> None:
        self.agent = agent
        self.agent_id = agent_id or agent.name
        self.group = group
        self.allow_remote_classes = allow_remote_classes
        self.refresh = refresh
        self.state = FollowerState.WAITING
        self.refused_unguarded = 0  # versions not applied: anyone could have written them
        self.running: tuple[str, int] | None = None  # (target key, version) applied last
        self._refused: tuple[str, int] | None = None
        self._reason = ""
        self._follows = ""
        self._changed_ms = int(time.time() * 1000)
        self._reported: bytes | None = None
        self._connect, self._layout = resolve_zk(zk_hosts)
        self._auth = resolve_zk_auth(zk_auth)
        self._secured = False
        self._complained: set[str] = set()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._zk: KazooClient = make_client(self._connect, auth=self._auth)
        self._thread = threading.Thread(target=self._run, name="config-follower", daemon=True)

    @property
    def targets(self) -> list[ConfigTarget]:
        """What the agent may follow, the first with a current version winning."""
        own = [ConfigTarget("agent", self.agent_id)]
        return own + ([ConfigTarget("group", self.group)] if self.group else [])

    def start(self) -> None:
        if self._auth is None:
            log.warning(
                "agent %s follows its configuration in ZooKeeper without credentials: anyone who "
                "reaches ZooKeeper can reconfigure it (set %s)",
                self.agent.name,
                AUTH_ENV,
            )
        self._zk.add_listener(self._on_state)
        self._zk.start_async()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self._zk.stop()
        self._zk.close()

    def _on_state(self, state: str) -> None:
        # kazoo's event thread: no blocking call here
        if state == KazooState.CONNECTED:
            self._secured = False  # a new session may follow a change of ACLs: check again
            self._reported = None  # and an expired session took the report with it
            self._wake.set()

    def _trigger(self, *_: object) -> None:
        self._wake.set()

    def _complain(self, key: str, message: str, *args: object) -> None:
        if key not in self._complained:
            self._complained.add(key)
            log.error(message, *args)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            pause = self.refresh
            if self._zk.connected:
                try:
                    self._cycle(ConfigStore(self._zk, self._layout, self._auth))
                except (NoAuthError, ZkAccessError) as exc:
                    self._complain(
                        "access",
                        "agent %s: ZooKeeper refuses access to %s (%s); set %s to the platform's credentials",
                        self.agent.name,
                        self._layout.config,
                        type(exc).__name__,
                        AUTH_ENV,
                    )
                    pause = _REFUSED_RETRY
                except KazooException as exc:
                    log.debug("agent %s: reading its configuration interrupted: %r", self.agent.name, exc)
                    pause = 0.5
            self.state = FollowerState.WAITING
            self._wake.wait(pause)

    def _cycle(self, store: ConfigStore) -> None:
        if not self._secured:
            store.secure(self._layout.config_statuses)
            self._secured = True
        self.state = FollowerState.READING
        for target in self.targets:
            try:
                pointer = store.current(target, watch=self._trigger)
            except CentralConfigError as exc:  # a pointer that is not one: what runs stays
                self._follows = target.key
                self._refuse((target.key, 0), str(exc))
                break
            if pointer is None:
                continue
            self._follows = target.key
            wanted = (target.key, pointer.version)
            if wanted not in (self.running, self._refused):
                self.state = FollowerState.APPLYING
                self._apply(store, target, pointer.version)
            break
        else:
            self._follows = ""
        self.state = FollowerState.REPORTING
        self._report(store)

    def _apply(self, store: ConfigStore, target: ConfigTarget, version: int) -> None:
        wanted = (target.key, version)
        try:
            text, _ = store.read(target, version)
        except CentralConfigError as exc:
            self._refuse(wanted, str(exc))
            return
        unguarded = self._unguarded(store, target, version)
        if unguarded:
            self._refuse(wanted, unguarded)
            return
        log.info("agent %s: applying version %d of its %s configuration", self.agent.name, version, target)
        if self.agent.reload(text, allow_classes=self.allow_remote_classes):
            self.running, self._reason = wanted, ""
            self._changed_ms = int(time.time() * 1000)
        else:
            self._refuse(wanted, self.agent.last_reload_error)

    def _refuse(self, wanted: tuple[str, int], reason: str) -> None:
        if (wanted, reason) != (self._refused, self._reason):
            log.error("agent %s: %s version %d refused: %s", self.agent.name, wanted[0], wanted[1], reason)
        self._refused, self._reason = wanted, reason[:MAX_REASON]
        self._changed_ms = int(time.time() * 1000)

    def _unguarded(self, store: ConfigStore, target: ConfigTarget, version: int) -> str:
        """Why the version may not be applied (anyone could have written it), or ``""``;
        such a znode is made private on the way."""
        if self._auth is None:
            return ""
        directory = target.directory(self._layout)
        open_nodes = []
        for path in (f"{directory}/{version_name(version)}", f"{directory}/current"):
            acls, stat = self._zk.get_acls(path)
            if world_writable(acls):
                open_nodes.append(path)
                try:
                    self._zk.set_acls(path, self._auth.acl(private=True), version=stat.aversion)
                except NoAuthError:
                    log.error("agent %s: the ACL of %s may not be changed", self.agent.name, path)
        if not open_nodes:
            return ""
        self.refused_unguarded += 1
        return (
            f"{', '.join(open_nodes)} writable by anyone: not applied; its ACL is made private to "
            f"{self._auth.user}, push the configuration again"
        )

    def _report(self, store: ConfigStore) -> None:
        running = self.running if self.running and self.running[0] == self._follows else None
        refused = self._refused if self._refused and self._refused[0] == self._follows else None
        report = AgentReport(
            self.group or "",
            self._follows,
            running[1] if running else 0,
            refused[1] if refused else 0,
            self._reason if refused else "",
            self._changed_ms,
        ).to_json()
        if report == self._reported:
            return
        path = self._layout.config_status(self.agent_id)
        acl = self._auth.acl(private=True) if self._auth is not None else None
        session = self._zk.client_id
        if session is None:
            return  # no session: reported when one is made (CONNECTED)
        try:
            stat = self._zk.exists(path)
            if stat is None:
                self._zk.create(path, report, acl=acl, ephemeral=True)
            elif stat.ephemeralOwner == session[0]:
                self._zk.set(path, report)
            else:
                self._complain(
                    "owner",
                    "agent %s: another process reports as agent id %s in %s; give each agent its own "
                    "--agent-id",
                    self.agent.name,
                    self.agent_id,
                    path,
                )
                return
        except (NodeExistsError, NoNodeError):
            self._wake.set()  # the other session's report went or came meanwhile: look again
            return
        self._reported = report
