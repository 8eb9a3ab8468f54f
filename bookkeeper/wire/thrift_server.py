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
Flume Thrift source and VHMS reuse this server. All but the Thrift is
:class:`~bookkeeper.wire.connection_server.ConnectionServer`'s, which the agent's Avro
server shares.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import time
from collections.abc import Callable
from typing import Any

from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.thrift import TApplicationException, TProcessor
from thriftpy2.transport import TCyMemoryBuffer

from bookkeeper.exceptions import MalformedFrameError
from bookkeeper.wire.connection_server import ConnectionServer, ServerLimits
from bookkeeper.wire.connections import Connection, ConnectionState
from bookkeeper.wire.frames import frame_size, input_protocol, recv_exact, write_frame

__all__ = ["FramedThriftServer", "ServerLimits"]

log = logging.getLogger(__name__)


class FramedThriftServer(ConnectionServer):
    """A threaded framed-Thrift server on ``host:port`` (0 = ephemeral); see the module doc.

    ``ssl_context`` (:func:`bookkeeper.wire.server_context`) makes it speak TLS only;
    ``check_request(frame)`` runs on each request frame before it is decoded and refuses it
    by raising ``ValueError``. ``read_call(frame)``, tried first on each request frame, may
    decode it itself: it answers ``(api, seqid, run)``, ``run()`` being the handler's call,
    or ``None`` to leave the frame to ``check_request`` and thriftpy2."""

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
        read_call: Callable[[bytearray], tuple[str, int, Callable[[], Any]] | None] | None = None,
        name: str = "thrift",
    ) -> None:
        super().__init__(host, port, limits=limits, ssl_context=ssl_context, name=name)
        self._service = service
        self._processor = TProcessor(service, handler)
        self._protocol_factory = protocol_factory or TCyBinaryProtocolFactory()  # type: ignore[no-untyped-call]
        self._check_request = check_request
        self._read_call = read_call

    # -- serving -----------------------------------------------------------------------------

    def _converse(self, connection: Connection) -> None:
        limits = self.limits
        while not self._stopped.is_set():
            frame = self._read_request(connection)
            self._enter(connection, ConnectionState.BUSY)
            call = self._read_call(frame) if self._read_call is not None else None
            if call is None and self._check_request is not None:
                try:
                    self._check_request(frame)
                except ValueError as exc:
                    self._refuse(connection, frame, exc)
                    return
            reply = self._process(frame) if call is None else self._answer(*call)
            self.stats["requests"] += 1
            self._enter(connection, ConnectionState.WRITING)
            connection.sock.settimeout(limits.frame_timeout)
            write_frame(connection.sock, reply)
            connection.progress = time.monotonic()
            self._enter(connection, ConnectionState.IDLE)

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
        if isinstance(result, TApplicationException):
            out: Any = TCyMemoryBuffer()
            processor.send_exception(self._protocol_factory.get_protocol(out), api, result, seqid)
            return bytes(out.getvalue())
        assert run is not None  # process_in gives a callable with every non-exception result
        return self._run(api, seqid, result, run)

    def _answer(self, api: str, seqid: int, run: Callable[[], Any]) -> bytes:
        """Run a call ``read_call`` decoded and encode its answer."""
        return self._run(api, seqid, getattr(self._service, api + "_result")(), run)

    def _run(self, api: str, seqid: int, result: Any, run: Callable[[], Any]) -> bytes:
        processor = self._processor
        out: Any = TCyMemoryBuffer()
        oprot = self._protocol_factory.get_protocol(out)
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
