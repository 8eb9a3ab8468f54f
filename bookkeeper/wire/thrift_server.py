"""A framed Thrift server over plain or TLS sockets, with the limits thriftpy2's own
transports lack. Every message travels as a frame (:mod:`bookkeeper.wire.frames`: a length
refused before any byte of its frame is buffered).

The server (:class:`FramedThriftServer`) runs a thread per connection under the limits of a
:class:`ServerLimits`; its connections live through these states::

    ACCEPTED --TLS--> HANDSHAKE --> NEW --a frame's first byte--> READING --the whole frame--> BUSY
    ACCEPTED --plain--> NEW                                                                     |
    IDLE <--the answer written-- WRITING <--the handler answered-------------------------------+
    IDLE --a frame's first byte--> READING

    each state but BUSY has a deadline: HANDSHAKE and NEW ``first_frame_timeout`` from the
    accept, IDLE ``idle_timeout`` from the last answer, READING and WRITING
    ``frame_timeout`` from the frame's first byte or the answer's start; past it the
    connection is closed and counted (``silent_closed``, ``idle_closed``, ``slow_frames``,
    ``slow_readers``). BUSY is bounded by the handler.

A new connection always finds room while some connection is not BUSY or WRITING: when its
peer address already holds ``max_connections_per_peer`` connections, the idlest of them is
closed (``evicted_peer_limit``); when the server holds ``max_connections``, the idlest
connection of the peer holding the most is (``evicted_full``). The idlest is the one whose
last progress (its accept, its last frame's first byte, its last answer) is oldest, so a
client holding many silent or trickling sockets loses them to a client that speaks. Only
when every connection is busy is the newcomer refused (``connections_refused``). A
connection that sends garbage or an oversized frame is closed (``bad_frames``), one whose
request the ``check_request`` hook refuses is answered a Thrift ``PROTOCOL_ERROR`` naming
the reason, then closed (``refused_requests``), a failed TLS handshake is counted
(``tls_failures``); the other connections and the server carry on. The collector agent's
Flume Thrift source and VHMS reuse this server.
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
from collections.abc import Callable
from typing import Any

from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.thrift import TApplicationException, TProcessor
from thriftpy2.transport import TCyMemoryBuffer

from bookkeeper.exceptions import FrameTooLargeError, MalformedFrameError
from bookkeeper.wire.connections import (
    TIMEOUT_COUNTERS,
    Connection,
    ConnectionState,
    Evicted,
    idlest,
    shut,
)
from bookkeeper.wire.frames import frame_size, input_protocol, recv_exact, write_frame
from bookkeeper.wire.tls import handshake

__all__ = ["FramedThriftServer", "ServerLimits"]

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


class FramedThriftServer:
    """A threaded framed-Thrift server on ``host:port`` (0 = ephemeral); see the module doc.

    ``ssl_context`` (:func:`bookkeeper.wire.server_context`) makes it speak TLS only;
    ``check_request(frame)`` runs on each request frame before it is decoded and refuses it
    by raising ``ValueError``."""

    def __init__(
        self,
        service: Any,
        handler: object,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        protocol_factory: Any = None,
        limits: ServerLimits | None = None,
        ssl_context: ssl.SSLContext | None = None,
        check_request: Callable[[bytearray], None] | None = None,
        name: str = "thrift",
    ) -> None:
        self._processor = TProcessor(service, handler)
        self._protocol_factory = protocol_factory or TCyBinaryProtocolFactory()  # type: ignore[no-untyped-call]
        self.limits = limits or ServerLimits()
        self.ssl_context = ssl_context
        self._check_request = check_request
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
            while not self._stopped.is_set():
                frame = self._read_request(connection)
                self._enter(connection, ConnectionState.BUSY)
                if self._check_request is not None:
                    try:
                        self._check_request(frame)
                    except ValueError as exc:
                        self._refuse(connection, frame, exc)
                        return
                reply = self._process(frame)
                self.stats["requests"] += 1
                self._enter(connection, ConnectionState.WRITING)
                connection.sock.settimeout(limits.frame_timeout)
                write_frame(connection.sock, reply)
                connection.progress = time.monotonic()
                self._enter(connection, ConnectionState.IDLE)
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

    def _read_request(self, connection: Connection) -> bytearray:
        """One request frame: its first byte within the NEW or IDLE deadline, the rest
        within ``frame_timeout`` of it."""
        limits = self.limits
        sock = connection.sock
        if connection.state is ConnectionState.NEW:
            wait_until = connection.accepted + limits.first_frame_timeout
        else:
            wait_until = connection.progress + limits.idle_timeout
        sock.settimeout(max(0.001, wait_until - time.monotonic()))
        start = sock.recv(4)
        if not start:
            raise EOFError("connection closed between frames")
        connection.progress = time.monotonic()
        self._enter(connection, ConnectionState.READING)
        deadline = connection.progress + limits.frame_timeout
        header = start + recv_exact(sock, 4 - len(start), deadline) if len(start) < 4 else start
        return recv_exact(sock, frame_size(header, limits.max_frame_size), deadline)

    def _count_and_log(self, counter: str, message: str, *args: object) -> None:
        """Count ``counter``; log ``message`` at its 1st, 2nd, 4th, 8th... occurrence, so
        that a client sending garbage in a loop cannot flood the log."""
        self.stats[counter] += 1
        count = self.stats[counter]
        if count & (count - 1) == 0:
            log.warning(f"%s: {message} ({counter}: %d)", self.name, *args, count)

    def _refuse(self, connection: Connection, frame: bytearray, reason: ValueError) -> None:
        """Answer a refused request with a ``PROTOCOL_ERROR`` naming ``reason`` (when its
        message header decodes), then let the connection close."""
        self._count_and_log("refused_requests", "refused a request of %s: %s", connection.peer, reason)
        try:
            api, _, seqid = input_protocol(self._protocol_factory, frame).read_message_begin()
        except Exception:  # whatever the decoder raises on garbage: nothing to answer
            return
        out: Any = TCyMemoryBuffer()
        error = TApplicationException(TApplicationException.PROTOCOL_ERROR, str(reason))
        self._processor.send_exception(self._protocol_factory.get_protocol(out), api, error, seqid)
        with contextlib.suppress(OSError):
            self._enter(connection, ConnectionState.WRITING)
            connection.sock.settimeout(self.limits.frame_timeout)
            write_frame(connection.sock, bytes(out.getvalue()))

    def _process(self, frame: bytearray) -> bytes:
        """Decode one call, run it, encode the answer (``TProcessor.process``, split so that
        a request that does not decode is told apart from a handler that fails)."""
        processor = self._processor
        try:
            api, seqid, result, run = processor.process_in(input_protocol(self._protocol_factory, frame))
        except Exception as exc:  # whatever the decoder raises on garbage
            raise MalformedFrameError(f"undecodable request: {exc!r}") from None
        out: Any = TCyMemoryBuffer()
        oprot = self._protocol_factory.get_protocol(out)
        if isinstance(result, TApplicationException):
            processor.send_exception(oprot, api, result, seqid)
            return bytes(out.getvalue())
        assert run is not None  # process_in gives a callable with every non-exception result
        try:
            result.success = run()
        except Exception as exc:
            if not processor.handle_exception(exc, result):
                self.stats["handler_errors"] += 1
                log.exception("%s: %s failed", self.name, api)
                error = TApplicationException(TApplicationException.INTERNAL_ERROR, repr(exc))
                processor.send_exception(oprot, api, error, seqid)
                return bytes(out.getvalue())
        if not result.oneway:
            processor.send_result(oprot, api, result, seqid)
        return bytes(out.getvalue())
