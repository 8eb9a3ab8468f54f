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
"""

from __future__ import annotations

import contextlib
import enum
import logging
import threading

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.retry import KazooRetry

__all__ = ["Registration", "RegistrationState", "make_client"]

log = logging.getLogger(__name__)


class RegistrationState(enum.Enum):
    CONNECTING = "connecting"
    REGISTERED = "registered"
    SUSPENDED = "suspended"
    CLOSED = "closed"


def make_client(connect: str, session_timeout: float = 10.0) -> KazooClient:
    """A kazoo client that retries its connection forever with capped backoff."""
    return KazooClient(
        hosts=connect,
        timeout=session_timeout,
        connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=5.0),
        command_retry=KazooRetry(max_tries=3, delay=0.1, max_delay=2.0),
    )


class Registration:
    """Keep the ephemeral ``path`` with ``payload`` alive in ZooKeeper at ``connect``."""

    def __init__(
        self,
        connect: str,
        path: str,
        payload: bytes,
        *,
        session_timeout: float = 10.0,
        warn_after: float = 2.0,
    ) -> None:
        self.connect = connect
        self.path = path
        self.payload = payload
        self.warn_after = warn_after
        self.client = make_client(connect, session_timeout)
        self.state = RegistrationState.CONNECTING
        self.registrations = 0
        self.registered = threading.Event()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"zk-register {path}", daemon=True)

    def start(self) -> None:
        self.client.add_listener(self._on_state)
        self.client.start_async()
        self._thread.start()

    def close(self) -> None:
        """Delete the znode (best effort) and close the session."""
        self._closed.set()
        self._wake.set()
        self._thread.join(timeout=5)
        self.state = RegistrationState.CLOSED
        try:
            if self.client.connected:
                _, stat = self.client.get(self.path)
                if stat.ephemeralOwner == self.client.client_id[0]:  # a successor's node stays
                    self.client.delete(self.path, version=stat.version)
        except KazooException:
            pass  # the session end removes an ephemeral node anyway
        self.client.stop()
        self.client.close()

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
            try:
                done = self._ensure_node()
            except KazooException as exc:
                log.debug("registration of %s failed (%r); retrying", self.path, exc)
                done = False

            if not done:
                self._closed.wait(0.2)
                if self.client.connected:
                    self._wake.set()
                continue
            self.state = RegistrationState.REGISTERED
            self.registered.set()
            if warned:
                log.warning("ZooKeeper at %s answers again; %s registered", self.connect, self.path)
                warned = False

    def _ensure_node(self) -> bool:
        """Create the znode; ``False`` when a stale one was in the way (try again)."""
        session_id = self.client.client_id[0] if self.client.client_id else None
        try:
            self.client.create(self.path, self.payload, ephemeral=True, makepath=True)
            self.registrations += 1
            return True
        except NodeExistsError:
            pass
        try:
            _, stat = self.client.get(self.path)
        except NoNodeError:
            return False
        if stat.ephemeralOwner == session_id:
            return True
        # Our own node from an expired session that the server has not reaped yet.
        with contextlib.suppress(NoNodeError):
            self.client.delete(self.path, version=stat.version)
        return False
