"""Ephemeral registration in ZooKeeper that outlives connection losses and session expiries.

State machine of a :class:`Registration`::

    CONNECTING --connected--> REGISTERED --connection lost--> SUSPENDED
        ^                          ^                              |
        |                          +------- reconnected ----------+
        +------------------- session expired (LOST) <-------------+
    any state --close()--> CLOSED

Kazoo retries the connection forever in the background; a worker thread (re)creates the
ephemeral znode each time a session is (re)established, so a process starts and serves
without ZooKeeper (one warning) and registers as soon as the ensemble answers.

While REGISTERED an exists-watch guards the znode: deleted (by an operator, or anyone
holding the rights) it is created again at once, its payload changed it is written back,
each with one warning, counted in ``restored``. Kazoo dispatches the watch within the
session, so the znode is back well within one session timeout.

With credentials (``auth``, else ``$ARTIMON_ZK_AUTH``..., see :mod:`bookkeeper.zk.acl`) the
znode and its parents carry Artimon's ACL, and parents that anyone could write are
tightened first. When ZooKeeper refuses the registration for lack of rights (no
credentials under a protected tree, or other ones), the refusal is logged once, counted in
``refusals``, and retried every ``_REFUSED_RETRY`` seconds: an operator may fix the
credentials or the ACL while the process serves.

With ``known`` (a path under ``/known``, :meth:`ZkLayout.known_record`) the registration is
also remembered there, persistently (:class:`KnownRecord`: when, and the payload), each time
the ephemeral is created: once per start, again after a session expiry, never per round. A
process killed or cut off leaves it behind, so ``artimon status`` names the process missing
rather than forgetting it; :meth:`close` (a clean stop) deletes it with the ephemeral. A
record that cannot be written is logged: the registration stands without it.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import threading
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoAuthError, NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent
from kazoo.retry import KazooRetry

from bookkeeper.exceptions import ZkAccessError
from bookkeeper.zk.acl import AUTH_ENV, ZkAuth, resolve_zk_auth, secure_path
from bookkeeper.zk.layout import KnownRecord

__all__ = ["Registration", "RegistrationState", "make_client"]

log = logging.getLogger(__name__)

_REFUSED_RETRY = 5.0  # seconds between attempts ZooKeeper refused for lack of rights


class RegistrationState(enum.Enum):
    CONNECTING = "connecting"
    REGISTERED = "registered"
    SUSPENDED = "suspended"
    CLOSED = "closed"


def make_client(
    connect: str, session_timeout: float = 10.0, *, auth: ZkAuth | str | None = None
) -> KazooClient:
    """A kazoo client that retries its connection forever with capped backoff. With
    credentials (``auth``, else the environment: :func:`bookkeeper.zk.acl.resolve_zk_auth`)
    it authenticates each session and creates znodes with Artimon's ACL (creator all,
    anyone read) unless a call gives another."""
    credentials = resolve_zk_auth(auth)
    return KazooClient(
        hosts=connect,
        timeout=session_timeout,
        connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=5.0),
        command_retry=KazooRetry(max_tries=3, delay=0.1, max_delay=2.0),
        auth_data=credentials.auth_data if credentials else None,
        default_acl=credentials.acl() if credentials else None,
    )


class Registration:
    """Keep the ephemeral ``path`` with ``payload`` alive in ZooKeeper at ``connect``,
    remembered in ``known`` if given (see the module doc); ``auth`` as :func:`make_client`
    takes it."""

    def __init__(
        self,
        connect: str,
        path: str,
        payload: bytes,
        *,
        session_timeout: float = 10.0,
        warn_after: float = 2.0,
        auth: ZkAuth | str | None = None,
        known: str | None = None,
    ) -> None:
        self.connect = connect
        self.path = path
        self.payload = payload
        self.known = known
        self.warn_after = warn_after
        self.auth = resolve_zk_auth(auth)
        self.client = make_client(connect, session_timeout, auth=self.auth)
        self.state = RegistrationState.CONNECTING
        self.registrations = 0
        self.refusals = 0  # attempts ZooKeeper refused for lack of rights
        self.restored = 0  # deletions and rewrites of the znode by another client, undone
        self._refusing = False
        self._tampered = False  # the watch fired: a create now puts back a deleted znode
        self.registered = threading.Event()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"zk-register {path}", daemon=True)

    def start(self) -> None:
        self.client.add_listener(self._on_state)
        self.client.start_async()
        self._thread.start()

    def close(self) -> None:
        """Delete the znode and its known record (best effort) and close the session."""
        self._closed.set()
        self._wake.set()
        self._thread.join(timeout=5)
        self.state = RegistrationState.CLOSED
        try:
            if self.client.connected:
                self._leave()
        except KazooException:
            pass  # the session end removes an ephemeral node anyway (a known record stays: missing)
        self.client.stop()
        self.client.close()

    def _leave(self) -> None:
        try:
            _, stat = self.client.get(self.path)
        except NoNodeError:
            stat = None
        if stat is not None and stat.ephemeralOwner != self.client.client_id[0]:
            return  # a successor's node stays, and so does its record
        if stat is not None:
            self.client.delete(self.path, version=stat.version)
        if self.known is not None:
            with contextlib.suppress(NoNodeError):
                self.client.delete(self.known)

    def _remember(self) -> None:
        """Write the known record (see the module doc); a failure leaves the registration be."""
        if self.known is None:
            return
        record = KnownRecord(int(time.time() * 1000), self.payload.decode(errors="replace")).to_json()
        try:
            if self.auth is not None:  # its parents as the registration's: Artimon's ACL
                secure_path(self.client, self.known.rpartition("/")[0], self.auth.acl())
            try:
                self.client.create(self.known, record, makepath=True)
            except NodeExistsError:
                self.client.set(self.known, record)
        except (KazooException, ZkAccessError) as exc:
            log.warning(
                "cannot write %s (%r): artimon status forgets this process once it is gone", self.known, exc
            )

    def _on_state(self, state: str) -> None:
        # Called on kazoo's event thread: no blocking calls here, hand over to the worker.
        if state == KazooState.CONNECTED:
            self._wake.set()
        elif state == KazooState.SUSPENDED:
            self.state = RegistrationState.SUSPENDED
            self.registered.clear()
        elif state == KazooState.LOST:
            self.state = RegistrationState.CONNECTING
            self.registered.clear()

    def _on_node(self, event: WatchedEvent) -> None:
        # kazoo's event thread, as _on_state: the worker looks at the znode and puts it back
        # (the echo of its own write-back wakes it too, and finds nothing to do)
        if event.type in (EventType.DELETED, EventType.CHANGED) and not self._closed.is_set():
            self._tampered = True
            self._wake.set()

    def _run(self) -> None:
        warned = False
        if not self._wake.wait(self.warn_after) and not self._closed.is_set():
            log.warning(
                "ZooKeeper at %s does not answer; serving anyway, %s is registered when it does",
                self.connect,
                self.path,
            )
            warned = True
        while not self._closed.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._closed.is_set():
                return
            pause = 0.2
            try:
                done = self._ensure_node()
            except ZkAccessError as exc:
                self._refused(str(exc))
                done, pause = False, _REFUSED_RETRY
            except NoAuthError:
                self._refused(f"ZooKeeper refuses to create {self.path} with these credentials")
                done, pause = False, _REFUSED_RETRY
            except KazooException as exc:
                log.debug("registration of %s failed (%r); retrying", self.path, exc)
                done = False

            if not done:
                self._closed.wait(pause)
                if self.client.connected:
                    self._wake.set()
                continue
            self.state = RegistrationState.REGISTERED
            self.registered.set()
            if self._refusing:
                log.warning("ZooKeeper accepts %s now", self.path)
                self._refusing = False
            if warned:
                log.warning("ZooKeeper at %s answers again; %s registered", self.connect, self.path)
                warned = False

    def _refused(self, reason: str) -> None:
        self.refusals += 1
        if not self._refusing:
            self._refusing = True
            hint = "" if self.auth else f" (this process has no credentials: set {AUTH_ENV})"
            log.error("%s%s; retrying every %.0f s", reason, hint, _REFUSED_RETRY)

    def _ensure_node(self) -> bool:
        """Create the znode; ``False`` when a stale one was in the way (try again)."""
        session_id = self.client.client_id[0] if self.client.client_id else None
        if self.auth is not None:
            parent = self.path.rpartition("/")[0]
            if parent:
                secure_path(self.client, parent, self.auth.acl())
        try:
            self.client.create(self.path, self.payload, ephemeral=True, makepath=True)
            self.registrations += 1
            self._remember()
            if self._tampered:
                self._restore("deleted")
            return self._watch()
        except NodeExistsError:
            pass
        try:
            data, stat = self.client.get(self.path)
        except NoNodeError:
            return False
        if stat.ephemeralOwner == session_id:
            if data != self.payload:
                self._restore("changed")
                self.client.set(self.path, self.payload, version=stat.version)
            return self._watch()
        # Our own node from an expired session that the server has not reaped yet.
        with contextlib.suppress(NoNodeError):
            self.client.delete(self.path, version=stat.version)
        return False

    def _restore(self, how: str) -> None:
        log.warning("ZooKeeper znode %s was %s by another client; putting it back", self.path, how)
        self.restored += 1
        self._tampered = False

    def _watch(self) -> bool:
        """Arm the watch that puts the znode back (kazoo keeps one per callback and path);
        ``False`` when it is gone or rewritten again before the watch was armed (try again)."""
        self._tampered = False
        try:
            data, _ = self.client.get(self.path, watch=self._on_node)
        except NoNodeError:
            self._tampered = True
            return False
        return bool(data == self.payload)
