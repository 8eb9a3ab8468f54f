"""Whether an agent of a group is still a member while it is cut off from ZooKeeper.

ZooKeeper expires a session that the ensemble has not heard from for its timeout, and the
group's other agents then take the member's endpoints over; the member itself learns it only
when it reconnects. An agent that went on polling its old share meanwhile would, once its
endpoints are reachable again (a healed partition, before its reconnection), poll them for
the same rounds as their new owners. So an agent cut off for a session timeout or longer,
with no server of the ensemble reachable, presumes its session expired (ZooKeeper's rule for
clients, Curator's ``LOST``): its znodes created before the cut are no longer it, until it
reconnects in the same session (it was a member all along) or registers in a new one (a
member from the round after). While the ensemble itself is down or without quorum, its
servers refuse connections or accept them without serving: no session expires then, and the
agents go on polling what they knew.

States (``SessionWatch``)::

    CONNECTED --connection lost--> CUT (since t) --sessionTimeout, no server reachable--> GONE
    CUT --reconnected, same session--> CONNECTED
    GONE --reconnected, same session--> CONNECTED (a member again)
    CUT, GONE --session expired (kazoo LOST), then a new session--> CONNECTED, the old znodes not us
"""

from __future__ import annotations

import socket
import threading
import time

from kazoo.client import KazooState

__all__ = ["SessionWatch", "ensemble_unreachable"]


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


class SessionWatch:
    """Follows a kazoo client's connection (:meth:`on_state` is its listener) for an agent
    whose session times out after ``session_timeout`` seconds on the ensemble ``connect``."""

    def __init__(self, connect: str, session_timeout: float) -> None:
        self.connect = connect
        self.session_timeout = session_timeout
        self._lock = threading.Lock()
        self._cut: tuple[float, int] | None = None  # (monotonic, epoch ms) since the connection was lost
        self._session_lost = False  # since the cut: the ensemble said our session expired
        self._gone_before_ms = 0  # our znodes created before this (epoch ms) are no longer us

    def on_state(self, state: str) -> None:
        """Kazoo's event thread (no blocking call here)."""
        with self._lock:
            if state == KazooState.SUSPENDED:
                self._cut = self._cut or (time.monotonic(), int(time.time() * 1000))
            elif state == KazooState.LOST:
                self._session_lost = True
                cut_at = self._cut[1] if self._cut else int(time.time() * 1000)
                self._gone_before_ms = max(self._gone_before_ms, cut_at)
            else:  # CONNECTED: a session that survived the cut keeps our membership
                if self._cut is not None and not self._session_lost:
                    self._gone_before_ms = 0
                self._cut, self._session_lost = None, False

    def gone_before(self) -> int:
        """The time (epoch ms) before which our znodes are no longer us; 0: none (see the
        module doc). Asks the ensemble's servers (a connection each, 0.5 s at most) only once
        cut off for a session timeout."""
        with self._lock:
            cut, gone = self._cut, self._gone_before_ms
        if (
            cut is not None
            and gone < cut[1]
            and time.monotonic() - cut[0] >= self.session_timeout
            and ensemble_unreachable(self.connect)
        ):
            with self._lock:
                self._gone_before_ms = max(self._gone_before_ms, cut[1])
        with self._lock:
            return self._gone_before_ms
