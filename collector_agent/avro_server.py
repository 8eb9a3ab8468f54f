"""An Avro IPC server of Flume's ``AvroSourceProtocol``, as Avro's ``NettyServer`` answers
it (:mod:`collector_agent.avro_ipc`, :mod:`collector_agent.avro_transport`), on
:class:`bookkeeper.wire.ConnectionServer`: a thread per connection under a
:class:`bookkeeper.wire.ServerLimits`, the Thrift server's connection states, deadlines,
room-making (the idlest connection of the fullest peer is closed for a newcomer) and
counters (``bad_frames``, ``silent_closed``, ``idle_closed``, ``slow_frames``,
``slow_readers``, ``evicted_*``, ``connections_refused``, ``tls_failures``).

A connection's first request carries the Avro handshake; a request refused by a limit after
it is answered a system error naming why, then its connection closed (``refused_requests``);
a first request that is not a handshake, or names another protocol, closes it
(``bad_frames``). ``allow(peer)`` refuses addresses at accept (``filtered``). Avro
handshakes are counted by their answer (``handshakes_both``, ``handshakes_client``,
``handshakes_none``: a ``NONE`` means a client did not send our protocol's MD5 at first).
"""

from __future__ import annotations

import io
import ssl
import threading
import time
from collections.abc import Callable

from bookkeeper import MalformedFrameError
from bookkeeper.wire import Connection, ConnectionServer, ConnectionState, ServerLimits
from collector_agent import avro_ipc
from collector_agent.avro_transport import FrameStream
from collector_agent.event import Event
from collector_agent.flume_limits import RequestLimits

__all__ = ["AvroServer"]

# (message name, events) -> "OK" or "FAILED"; raising answers a system error
Handler = Callable[[str, list[Event]], str]
_MAX_KNOWN_HASHES = 64


class AvroServer(ConnectionServer):
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
        super().__init__(host, port, limits=limits, ssl_context=ssl_context, name=name)
        self.handler = handler
        self.request_limits = request_limits
        self.deflate = deflate
        self.allow = allow
        self._known_hashes: set[bytes] = {avro_ipc.PROTOCOL_MD5}
        self._hashes_lock = threading.Lock()

    def _admit(self, peer: str) -> bool:
        return self.allow is None or self.allow(peer)

    def _converse(self, connection: Connection) -> None:
        limits = self.limits
        stream = FrameStream(connection.sock, deflate=self.deflate)
        handshaken = False
        while not self._stopped.is_set():
            if connection.state is ConnectionState.NEW:
                stream.wait_first_byte(connection.accepted + limits.first_frame_timeout)
            else:
                stream.wait_first_byte(connection.progress + limits.idle_timeout)
            connection.progress = time.monotonic()
            self._enter(connection, ConnectionState.READING)
            serial, request = stream.read(limits.max_frame_size, connection.progress + limits.frame_timeout)
            self._enter(connection, ConnectionState.BUSY)
            answer, handshaken, refused = self._answer(connection.peer, request, handshaken)
            self._enter(connection, ConnectionState.WRITING)
            stream.write(serial, answer, time.monotonic() + limits.frame_timeout)
            if refused:
                return
            connection.progress = time.monotonic()
            self._enter(connection, ConnectionState.IDLE)

    def _answer(self, peer: str, request: bytes, handshaken: bool) -> tuple[bytes, bool, bool]:
        """The answer to one request, whether the connection's handshake is done, and
        whether the connection closes after the answer."""
        out = io.BytesIO()
        start = 0
        if not handshaken:
            match, start = self._handshake(request)
            self.stats[f"handshakes_{match.lower()}"] += 1
            avro_ipc.write_handshake_response(out, match)
            if match == "NONE":
                return out.getvalue(), False, False
        try:
            name, params = avro_ipc.check_request(request, start, self.request_limits)
            events = avro_ipc.decode_events(request, params, name) if name else []
        except Exception as exc:  # fastavro raises whatever the bytes lead it to (UnicodeError...)
            self._count_and_log("refused_requests", "refused a request of %s: %s", peer, exc)
            avro_ipc.write_response(out, None, error=f"refused: {exc}")
            return out.getvalue(), True, True
        if name:
            try:
                status = self.handler(name, events)
            except Exception as exc:
                avro_ipc.write_response(out, None, error=f"{name} failed: {exc!r}")
            else:
                avro_ipc.write_response(out, status)
        self.stats["requests"] += 1
        return out.getvalue(), True, False

    def _handshake(self, request: bytes) -> tuple[str, int]:
        """The match to answer a request's handshake, and where its call starts."""
        try:
            handshake, start = avro_ipc.read_handshake_request(request, self.request_limits)
        except Exception as exc:  # fastavro raises whatever the bytes lead it to
            raise MalformedFrameError(f"not an Avro handshake: {exc}") from None
        known = handshake.client_hash in self._known_hashes
        if not known and handshake.client_protocol is not None:
            if not avro_ipc.known_protocol(handshake.client_protocol):
                raise MalformedFrameError("the client speaks another protocol than AvroSourceProtocol")
            with self._hashes_lock:
                if len(self._known_hashes) < _MAX_KNOWN_HASHES:
                    self._known_hashes.add(handshake.client_hash)
            known = True
        if not known:
            return "NONE", start
        return ("BOTH" if handshake.server_hash == avro_ipc.PROTOCOL_MD5 else "CLIENT"), start
