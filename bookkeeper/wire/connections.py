"""The connections of a :class:`~bookkeeper.wire.FramedThriftServer`: their states (the
server's module doc draws the moves), the counter a deadline passed in each adds to, and
which of them may be closed to make room for a newcomer (the idlest)."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import socket
from collections.abc import Iterable

__all__ = ["EVICTABLE", "TIMEOUT_COUNTERS", "Connection", "ConnectionState", "Evicted", "idlest", "shut"]


class ConnectionState(enum.Enum):
    HANDSHAKE = "handshake"
    NEW = "new"
    READING = "reading"
    BUSY = "busy"
    WRITING = "writing"
    IDLE = "idle"


# The counter a deadline passed in this state adds to (BUSY has none).
TIMEOUT_COUNTERS = {
    ConnectionState.HANDSHAKE: "silent_closed",
    ConnectionState.NEW: "silent_closed",
    ConnectionState.IDLE: "idle_closed",
    ConnectionState.READING: "slow_frames",
    ConnectionState.WRITING: "slow_readers",
}
EVICTABLE = frozenset(
    {ConnectionState.HANDSHAKE, ConnectionState.NEW, ConnectionState.IDLE, ConnectionState.READING}
)


class Evicted(Exception):
    """The connection was closed to make room for another (already counted)."""


@dataclasses.dataclass(eq=False)
class Connection:
    sock: socket.socket
    peer: str
    accepted: float
    progress: float  # the last time it moved: accepted, a frame began, an answer left
    state: ConnectionState = ConnectionState.NEW
    evicted: bool = False


def shut(sock: socket.socket) -> None:
    """Wake the thread reading ``sock`` (the socket's own shutdown: an ``SSLSocket``'s
    would drop its TLS state under that thread's feet)."""
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def idlest(connections: Iterable[Connection]) -> Connection | None:
    """The connection that made progress longest ago among those that may be closed."""
    candidates = [c for c in connections if c.state in EVICTABLE]
    return min(candidates, key=lambda c: c.progress) if candidates else None
