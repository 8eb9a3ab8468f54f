"""Whether an agent of a group may poll its share while it is cut off from ZooKeeper.

ZooKeeper expires a session that the ensemble has not heard from for its timeout, and the
group's other agents then take the member's endpoints over, each deciding within
``horizon`` seconds of a round's start (its read after a ``sync``, and its catch-up look);
the member itself learns it only when it reconnects. Meanwhile it cannot know whether it
still owns its share: one that went on polling would, once its endpoints are reachable
again (a healed partition, before its reconnection) or if they never were cut off from it
(only ZooKeeper was), poll them for the same rounds as their new owners.

So the agent counts from the last read ZooKeeper answered in its session (its group is read
at every round's start and every few seconds besides): the server heard it then, so the
session cannot expire before that plus ``sessionTimeout``. A round that begins within
``horizon`` of that earliest expiry, with no server of the ensemble reachable (a partition
of its host, or of ZooKeeper's hosts from it), finds it *presumed gone*: it polls nothing
(ZooKeeper's rule for clients, Curator's ``LOST``, taken before the session could expire
rather than after, whether or not kazoo noticed the cut yet). With a ``horizon`` as long as
the session or longer (a catch-up later than ``sessionTimeout``), that is every round it is
cut off in, and each round asks the ensemble whether it is reachable. A session that
ZooKeeper says expired (kazoo ``LOST``) is gone for sure. The agent polls again once it has
a live session and a view read in it: its session answered again (reconnected in the same
session: a member all along, its share comes back at once), or, after an expiry, once a read
after a ``sync`` in the new session answered (its new znode joins from a later round, as
any new member's). While the ensemble itself is down or without quorum, its servers refuse
connections or accept them without serving: no session expires then, and the agents go on
polling what they knew.

States (``SessionWatch.state``)::

    MEMBER --no answer for sessionTimeout - horizon, no server reachable--> PRESUMED_GONE
    PRESUMED_GONE --reconnected in the same session, or a read answered in it--> MEMBER
    MEMBER, PRESUMED_GONE --the session expired (kazoo LOST)--> EXPIRED
    EXPIRED --a read after a sync in the new session answered--> MEMBER
"""

from __future__ import annotations

import enum
import logging
import socket
import threading
import time

from kazoo.client import KazooState

__all__ = ["SessionState", "SessionWatch", "ensemble_unreachable"]

log = logging.getLogger(__name__)


def ensemble_unreachable(connect: str, timeout: float = 0.5) -> bool:
    """No server of ``connect`` (``host:port,...``) can be reached: each connection times out
    or finds no route. A refused connection is a host we reach whose server is down (the
    ensemble's outage, during which no session expires), an accepted one a server we reach."""
    for address in connect.split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return False
        except ConnectionRefusedError:
            return False
        except (OSError, ValueError):
            continue
    return True


class SessionState(enum.Enum):
    MEMBER = "member"
    PRESUMED_GONE = "presumed gone"
    EXPIRED = "expired"


class SessionWatch:
    """Follows a kazoo client's connection (:meth:`on_state` is its listener) for an agent
    whose session times out after ``session_timeout`` seconds on the ensemble ``connect``, and
    whose group decides a round within ``horizon`` seconds of its start (see the module doc);
    ``name`` (its source's) in what it logs."""

    def __init__(self, connect: str, session_timeout: float, horizon: float, name: str = "") -> None:
        self.name = name
        self.connect = connect
        self.session_timeout = session_timeout
        self.horizon = horizon
        self.state = SessionState.MEMBER
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._lost_at = 0.0  # monotonic: when ZooKeeper last said our session expired
        self._presumed_at = 0.0  # monotonic: when we last presumed it gone

    def on_state(self, state: str) -> None:
        """Kazoo's event thread (no blocking call here)."""
        with self._lock:
            if state == KazooState.LOST:
                self._lost_at = time.monotonic()
                self._move(SessionState.EXPIRED, "its ZooKeeper session expired: polling nothing")
            elif state == KazooState.CONNECTED and self.state is SessionState.PRESUMED_GONE:
                self._move(SessionState.MEMBER, "reconnected in the same session: polling its share again")

    def member(self, answered_at: float | None, fresh_since: float | None) -> bool:
        """Whether the agent may poll its share in the round beginning now: ``answered_at``
        the monotonic time the last read ZooKeeper answered began, ``fresh_since`` that of the
        round's own read after a ``sync`` if it answered (``None`` if not). Asks the
        ensemble's servers (a connection each, 0.5 s at most) only when the session could
        expire within ``horizon``."""
        now = time.monotonic()
        with self._lock:
            if self.state is SessionState.EXPIRED and fresh_since is not None and fresh_since > self._lost_at:
                self._move(SessionState.MEMBER, "a view read in its new session: polling its share again")
            elif self.state is SessionState.PRESUMED_GONE and (answered_at or 0.0) > self._presumed_at:
                self._move(SessionState.MEMBER, "its session answers again: polling its share again")
            if self.state is not SessionState.MEMBER:
                return False
            if now - (answered_at or self._started) + self.horizon < self.session_timeout:
                return True
        if not ensemble_unreachable(self.connect):
            return True
        with self._lock:
            if self.state is SessionState.MEMBER:
                self._presumed_at = now
                quiet = now - (answered_at or self._started)
                why = f"no ZooKeeper server reachable, none answered for {quiet:.1f} s: presumed gone"
                self._move(SessionState.PRESUMED_GONE, why)
            return False

    def _move(self, state: SessionState, why: str) -> None:
        """Under the lock: the new state, logged (a warning when it stops the polling)."""
        self.state = state
        level = logging.INFO if state is SessionState.MEMBER else logging.WARNING
        log.log(level, "source %s: %s", self.name, why)
