"""An Avro IPC server of Flume's ``AvroSourceProtocol``, as Avro's ``NettyServer`` answers
it (:mod:`collector_agent.avro_ipc`, :mod:`collector_agent.avro_transport`), with a thread
per connection under :class:`bookkeeper.wire.ServerLimits`.

A connection lives through the states of :class:`bookkeeper.wire.ConnectionState`, as a
``FramedThriftServer``'s do::

    ACCEPTED --TLS--> HANDSHAKE --> NEW --a pack's first byte--> READING --the whole pack--> BUSY
    IDLE <--the answer written-- WRITING <--the handler answered----------------------------+
    IDLE --a pack's first byte--> READING

HANDSHAKE and NEW last at most ``first_frame_timeout`` from the accept, IDLE
``idle_timeout`` from the last answer, READING and WRITING ``frame_timeout``; past it the
connection is closed and counted (``silent_closed``, ``idle_closed``, ``slow_frames``,
``slow_readers``). A newcomer finds no room when the server holds ``max_connections`` or
its peer ``max_connections_per_peer`` (``connections_refused``), or when ``allow(peer)``
says no (``filtered``). A pack over ``max_frame_size`` or that does not parse closes its
connection (``bad_frames``); a request refused by a limit after the Avro handshake is
answered a system error naming why, then closed (``refused_requests``); a failed TLS
handshake is counted (``tls_failures``). The other connections carry on. Avro handshakes
are counted by their answer (``handshakes_both``, ``handshakes_client``, ``handshakes_none``:
a ``NONE`` means a client did not send our protocol's MD5 at first).
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable

from bookkeeper.wire import TIMEOUT_COUNTERS, ConnectionState, ServerLimits
from collector_agent import avro_ipc
from collector_agent.avro_transport import FrameStream
from collector_agent.event import Event
from collector_agent.exceptions import RequestRefusedError
from collector_agent.flume_limits import RequestLimits

__all__ = ["AvroServer"]

log = logging.getLogger(__name__)

# (message name, events) -> "OK" or "FAILED"; raising answers a system error
Handler = Callable[[str, list[Event]], str]
_MAX_KNOWN_HASHES = 64


class _Connection:
    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock = sock
        self.peer = peer
        self.accepted = self.progress = time.monotonic()
        self.state = ConnectionState.NEW
        self.handshaken = False  # Avro's handshake succeeded: later requests carry none


class AvroServer:
    """Serves ``handler`` on ``host:port`` (0 = ephemeral); see the module doc."""

    def __init__(
        self,
        handler: Handler,
        host: str,
        port: int,
        *,
        limits: ServerLimits,
        request_limits: RequestLimits,
        deflate: bool = False,
        ssl_context: ssl.SSLContext | None = None,
        allow: Callable[[str], bool] | None = None,
        name: str = "avro",
    ) -> None:
        self.handler = handler
        self.limits = limits
        self.request_limits = request_limits
        self.deflate = deflate
        self.ssl_context = ssl_context
        self.allow = allow
        self.name = name
        self.stats: Counter[str] = Counter()
        self._listener = socket.create_server((host, port), backlog=1024)
        self.host, self.port = self._listener.getsockname()[:2]
        self._connections: set[_Connection] = set()
        self._threads: set[threading.Thread] = set()
        self._known_hashes: set[bytes] = {avro_ipc.PROTOCOL_MD5}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name=f"{name}-accept", daemon=True)

    @property
    def open_connections(self) -> int:
        return len(self._connections)

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
            for connection in self._connections:
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(connection.sock, socket.SHUT_RDWR)
            threads = [*self._threads, self._thread]
        for thread in threads:
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(timeout=5)

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
            connection = _Connection(sock, str(address[0]))
            if self.allow is not None and not self.allow(connection.peer):
                self.stats["filtered"] += 1
                sock.close()
                continue
            with self._lock:
                same_peer = sum(1 for c in self._connections if c.peer == connection.peer)
                if (
                    len(self._connections) >= self.limits.max_connections
                    or same_peer >= self.limits.max_connections_per_peer
                ):
                    self.stats["connections_refused"] += 1
                    sock.close()
                    continue
                self._connections.add(connection)
                thread = threading.Thread(
                    target=self._serve, args=(connection,), name=f"{self.name}-conn", daemon=True
                )
                self._threads.add(thread)
            self.stats["connections"] += 1
            thread.start()

    def _serve(self, connection: _Connection) -> None:
        limits = self.limits
        try:
            connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.ssl_context is not None:
                connection.state = ConnectionState.HANDSHAKE
                connection.sock.settimeout(limits.first_frame_timeout)
                connection.sock = self.ssl_context.wrap_socket(connection.sock, server_side=True)
                connection.state = ConnectionState.NEW
            stream = FrameStream(connection.sock, deflate=self.deflate)
            while not self._stopped.is_set():
                if connection.state is ConnectionState.NEW:
                    stream.wait_first_byte(connection.accepted + limits.first_frame_timeout)
                else:
                    stream.wait_first_byte(connection.progress + limits.idle_timeout)
                connection.progress = time.monotonic()
                connection.state = ConnectionState.READING
                serial, request = stream.read(
                    limits.max_frame_size, connection.progress + limits.frame_timeout
                )
                connection.state = ConnectionState.BUSY
                answer, refused = self._answer(connection, request)
                connection.state = ConnectionState.WRITING
                stream.write(serial, answer, time.monotonic() + limits.frame_timeout)
                if refused:
                    return
                connection.progress = time.monotonic()
                connection.state = ConnectionState.IDLE
        except TimeoutError:
            self.stats[TIMEOUT_COUNTERS.get(connection.state, "timeouts")] += 1
        except ssl.SSLError as exc:
            self._count_and_log("tls_failures", "TLS with %s failed: %s", connection.peer, exc)
        except RequestRefusedError as exc:
            self._count_and_log("bad_frames", "closed a connection of %s: %s", connection.peer, exc)
        except (EOFError, OSError):
            pass
        finally:
            with self._lock:
                self._connections.discard(connection)
                self._threads.discard(threading.current_thread())
            connection.sock.close()

    def _answer(self, connection: _Connection, request: bytes) -> tuple[bytes, bool]:
        """The answer to one request, and whether the connection closes after it."""
        out = io.BytesIO()
        start = 0
        if not connection.handshaken:
            match, start = self._handshake(request)
            self.stats[f"handshakes_{match.lower()}"] += 1
            avro_ipc.write_handshake_response(out, match)
            if match == "NONE":
                return out.getvalue(), False
            connection.handshaken = True
        try:
            name, params = avro_ipc.check_request(request, start, self.request_limits)
            events = avro_ipc.decode_events(request, params, name) if name else []
        except Exception as exc:  # fastavro raises whatever the bytes lead it to (UnicodeError...)
            self._count_and_log("refused_requests", "refused a request of %s: %s", connection.peer, exc)
            avro_ipc.write_response(out, None, error=f"refused: {exc}")
            return out.getvalue(), True
        if name:
            try:
                status = self.handler(name, events)
            except Exception as exc:
                avro_ipc.write_response(out, None, error=f"{name} failed: {exc!r}")
            else:
                avro_ipc.write_response(out, status)
        self.stats["requests"] += 1
        return out.getvalue(), False

    def _handshake(self, request: bytes) -> tuple[str, int]:
        """The match to answer a request's handshake, and where its call starts."""
        try:
            handshake, start = avro_ipc.read_handshake_request(request, self.request_limits)
        except Exception as exc:  # fastavro raises whatever the bytes lead it to
            raise RequestRefusedError(f"not an Avro handshake: {exc}") from None
        known = handshake.client_hash in self._known_hashes
        if not known and handshake.client_protocol is not None:
            if not avro_ipc.known_protocol(handshake.client_protocol):
                raise RequestRefusedError("the client speaks another protocol than AvroSourceProtocol")
            with self._lock:
                if len(self._known_hashes) < _MAX_KNOWN_HASHES:
                    self._known_hashes.add(handshake.client_hash)
            known = True
        if not known:
            return "NONE", start
        return ("BOTH" if handshake.server_hash == avro_ipc.PROTOCOL_MD5 else "CLIENT"), start

    def _count_and_log(self, counter: str, message: str, *args: object) -> None:
        """Count ``counter``; log its 1st, 2nd, 4th, 8th... occurrence (no flood)."""
        self.stats[counter] += 1
        count = self.stats[counter]
        if count & (count - 1) == 0:
            log.warning(f"%s: {message} ({counter}: %d)", self.name, *args, count)
