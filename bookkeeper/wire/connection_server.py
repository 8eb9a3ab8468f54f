"""A server of framed requests over plain or TLS sockets, a thread per connection, with the
limits of a :class:`ServerLimits`; what :class:`~bookkeeper.wire.FramedThriftServer` and
the collector agent's Avro server share. A subclass writes ``_converse(connection)``: read
requests, answer them, moving the connection through its states (``_enter``) as the
Thrift server's module doc draws them; this class accepts (unless ``_admit(peer)`` says
no), makes room, does TLS, counts what a deadline, a bad frame or TLS ends, and stops.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import socket
import ssl
import threading
import time
from collections import Counter

from bookkeeper.exceptions import FrameTooLargeError, MalformedFrameError
from bookkeeper.wire.connections import (
    TIMEOUT_COUNTERS,
    Connection,
    ConnectionState,
    Evicted,
    idlest,
    shut,
)
from bookkeeper.wire.tls import handshake

__all__ = ["ConnectionServer", "ServerLimits"]

log = logging.getLogger(__name__)

_BACKLOG = 1024


@dataclasses.dataclass(frozen=True)
class ServerLimits:
    """What one client may hold of a :class:`FramedThriftServer`; see the module doc.

    ``max_frame_size`` bounds a request (bytes); ``max_connections`` the connections open at
    once (a thread each), ``max_connections_per_peer`` those of one peer address;
    ``first_frame_timeout`` (s) bounds how long a new connection may stay silent (TLS
    handshake included), ``idle_timeout`` how long one may sit between requests,
    ``frame_timeout`` how long a frame may take to arrive once its first byte did, and an
    answer to leave."""

    max_frame_size: int = 1024 * 1024
    max_connections: int = 64
    max_connections_per_peer: int = 16
    first_frame_timeout: float = 10.0
    idle_timeout: float = 300.0
    frame_timeout: float = 30.0

    def __post_init__(self) -> None:
        for name in ("max_frame_size", "max_connections", "max_connections_per_peer"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} = {getattr(self, name)} must be at least 1")
        for name in ("first_frame_timeout", "idle_timeout", "frame_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} = {getattr(self, name)} must be positive")


class ConnectionServer:
    """Accepts on ``host:port`` (0 = ephemeral) and runs ``_converse`` per connection; see
    the module doc. ``ssl_context`` (:func:`bookkeeper.wire.server_context`) makes it speak
    TLS only."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        limits: ServerLimits | None = None,
        ssl_context: ssl.SSLContext | None = None,
        name: str = "server",
    ) -> None:
        self.limits = limits or ServerLimits()
        self.ssl_context = ssl_context
        self.name = name
        self.stats: Counter[str] = Counter()
        # a deep backlog: a burst of connections beyond it has its SYNs dropped, and the
        # well-behaved client among them waits a second for its retransmission
        self._listener = socket.create_server((host, port), backlog=_BACKLOG)
        self.host, self.port = self._listener.getsockname()[:2]
        self._peers: dict[str, set[Connection]] = {}
        self._count = 0
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._accept_loop, name=f"{name}-accept-{self.port}", daemon=True
        )

    @property
    def open_connections(self) -> int:
        return self._count

    @property
    def threads(self) -> int:
        """Connection threads alive (a closed connection's thread ends soon after)."""
        with self._lock:
            return len(self._threads)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting, close every connection, wait for the threads."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            for connections in self._peers.values():
                for connection in connections:
                    shut(connection.sock)
            threads = list(self._threads)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)

    # -- accepting ---------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                sock, address = self._listener.accept()
            except OSError:
                if self._stopped.is_set():
                    return
                self.stats["accept_errors"] += 1
                self._stopped.wait(0.01)  # out of descriptors, say: no busy loop meanwhile
                continue
            now = time.monotonic()
            connection = Connection(sock, str(address[0]), now, now)
            if not self._admit(connection.peer):
                self.stats["filtered"] += 1
                sock.close()
                continue
            with self._lock:
                if not self._make_room(connection.peer):
                    self.stats["connections_refused"] += 1
                    sock.close()
                    continue
                self._peers.setdefault(connection.peer, set()).add(connection)
                self._count += 1
                thread = threading.Thread(
                    target=self._serve, args=(connection,), name=f"{self.name}-conn", daemon=True
                )
                self._threads.add(thread)
            self.stats["connections"] += 1
            thread.start()

    def _make_room(self, peer: str) -> bool:
        """Under the lock: close the idlest connection if ``peer`` or the server is full;
        ``False`` when every candidate is busy."""
        limits = self.limits
        mine = self._peers.get(peer, set())
        if len(mine) >= limits.max_connections_per_peer:
            victim, counter = idlest(mine), "evicted_peer_limit"
        elif self._count >= limits.max_connections:
            biggest = max(self._peers.values(), key=len)
            victim = idlest(biggest) or idlest(c for cs in self._peers.values() for c in cs)
            counter = "evicted_full"
        else:
            return True
        if victim is None:
            return False
        self._forget(victim)
        victim.evicted = True
        self.stats[counter] += 1
        shut(victim.sock)  # under the lock: its thread cannot have closed it yet
        return True

    def _forget(self, connection: Connection) -> None:
        """Under the lock: no longer count ``connection`` (once)."""
        peers = self._peers.get(connection.peer)
        if peers is not None and connection in peers:
            peers.discard(connection)
            self._count -= 1
            if not peers:
                del self._peers[connection.peer]

    def _enter(self, connection: Connection, state: ConnectionState) -> None:
        """Move to ``state`` unless the connection was evicted meanwhile."""
        with self._lock:
            if connection.evicted:
                raise Evicted
            connection.state = state

    # -- serving -----------------------------------------------------------------------------

    def _serve(self, connection: Connection) -> None:
        limits = self.limits
        try:
            connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.ssl_context is not None:
                self._enter(connection, ConnectionState.HANDSHAKE)
                wrapped = self.ssl_context.wrap_socket(
                    connection.sock, server_side=True, do_handshake_on_connect=False
                )
                with self._lock:
                    connection.sock = wrapped  # the plain socket is detached now
                self._enter(connection, ConnectionState.HANDSHAKE)
                handshake(wrapped, connection.accepted + limits.first_frame_timeout)
                self._enter(connection, ConnectionState.NEW)
            self._converse(connection)
        except Evicted:
            pass
        except TimeoutError:
            if not connection.evicted:
                self.stats[TIMEOUT_COUNTERS.get(connection.state, "timeouts")] += 1
        except ssl.SSLError as exc:
            if not connection.evicted:
                self._count_and_log("tls_failures", "TLS with %s failed: %s", connection.peer, exc)
        except (FrameTooLargeError, MalformedFrameError) as exc:
            self._count_and_log(
                "bad_frames", "closed a connection of %s that sent a bad frame: %s", connection.peer, exc
            )
        except (EOFError, OSError):
            pass
        finally:
            with self._lock:
                self._forget(connection)
                self._threads.discard(threading.current_thread())
            connection.sock.close()

    def _admit(self, peer: str) -> bool:
        """Whether a connection from address ``peer`` may be served (else it is closed at
        once and counted, ``filtered``); all may, unless a subclass says otherwise."""
        return True

    def _converse(self, connection: Connection) -> None:
        """Serve ``connection`` until it closes (raising ends it, counted by ``_serve``)."""
        raise NotImplementedError

    def _count_and_log(self, counter: str, message: str, *args: object) -> None:
        """Count ``counter``; log ``message`` at its 1st, 2nd, 4th, 8th... occurrence, so
        that a client sending garbage in a loop cannot flood the log."""
        self.stats[counter] += 1
        count = self.stats[counter]
        if count & (count - 1) == 0:
            log.warning(f"%s: {message} ({counter}: %d)", self.name, *args, count)
