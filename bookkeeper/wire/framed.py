"""Framed Thrift over plain sockets, with the limits thriftpy2's own transports lack.

Every message travels as a frame: a 4-byte big-endian length, then the Thrift message.
Frames longer than ``max_frame_size`` or not positive are refused before any byte of them is
buffered. Decoding reads from a stream that ends at the frame's end, so a length field inside
a message that claims more bytes than the frame holds fails at once with an end-of-file error
instead of allocating what it claims.

The server runs a thread per connection (at most ``max_connections``, more are closed on
arrival and counted). A connection that sends garbage or an oversized frame is closed; the
others and the server carry on. The collector agent's Flume Thrift source reuses this server
with the compact protocol.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import struct
import threading
import time
from collections import Counter
from typing import Any

from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.thrift import TApplicationException, TMessageType, TProcessor
from thriftpy2.transport import TCyBufferedTransport, TCyMemoryBuffer

from bookkeeper.exceptions import (
    EndpointUnavailableError,
    FrameTooLargeError,
    MalformedFrameError,
)

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "FramedThriftServer",
    "call",
    "read_frame",
    "write_frame",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024
_HEADER = struct.Struct("!i")


def _recv_exact(sock: socket.socket, size: int, deadline: float | None) -> bytearray:
    data = bytearray(size)
    view = memoryview(data)
    got = 0
    while got < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"deadline passed after {got} of {size} bytes")
            sock.settimeout(left)
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise EOFError(f"connection closed after {got} of {size} bytes")
        got += n
    return data


def read_frame(sock: socket.socket, max_frame_size: int, deadline: float | None = None) -> bytearray:
    """Read one frame; ``EOFError`` on a clean close, ``TimeoutError`` past the socket's
    timeout or the ``time.monotonic()`` deadline, ``FrameTooLargeError`` or
    ``MalformedFrameError`` on a bad length (nothing of the body is read then)."""
    header = _recv_exact(sock, 4, deadline)
    (size,) = _HEADER.unpack(header)
    if size <= 0:
        raise MalformedFrameError(f"frame length {size} is not positive")
    if size > max_frame_size:
        raise FrameTooLargeError(f"frame of {size} bytes exceeds the maximum of {max_frame_size}")
    return _recv_exact(sock, size, deadline)


def write_frame(sock: socket.socket, payload: bytes) -> None:
    """Send one frame (length prefix and payload in one ``sendall``)."""
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def _input_protocol(protocol_factory: Any, frame: bytes | bytearray) -> Any:
    return protocol_factory.get_protocol(TCyBufferedTransport(io.BytesIO(frame)))


class FramedThriftServer:
    """A threaded framed-Thrift server on ``host:port`` (0 = ephemeral); see the module doc."""

    def __init__(
        self,
        service: Any,
        handler: object,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        protocol_factory: Any = None,
        max_frame_size: int = 1024 * 1024,
        idle_timeout: float = 300.0,
        max_connections: int = 64,
        name: str = "thrift",
    ) -> None:
        self._processor = TProcessor(service, handler)
        self._protocol_factory = protocol_factory or TCyBinaryProtocolFactory()  # type: ignore[no-untyped-call]
        self.max_frame_size = max_frame_size
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self.name = name
        self.stats: Counter[str] = Counter()
        self._listener = socket.create_server((host, port), backlog=128)
        self.host, self.port = self._listener.getsockname()[:2]
        self._clients: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._accept_loop, name=f"{name}-accept-{self.port}", daemon=True
        )

    @property
    def open_connections(self) -> int:
        return len(self._clients)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting, close every connection, wait for the accept thread."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            clients = list(self._clients)
        for client in clients:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                if self._stopped.is_set():
                    return
                self.stats["accept_errors"] += 1
                continue
            with self._lock:
                if len(self._clients) >= self.max_connections:
                    self.stats["connections_refused"] += 1
                    client.close()
                    continue
                self._clients.add(client)
            self.stats["connections"] += 1
            threading.Thread(
                target=self._serve_client, args=(client,), name=f"{self.name}-conn", daemon=True
            ).start()

    def _serve_client(self, client: socket.socket) -> None:
        client.settimeout(self.idle_timeout)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while not self._stopped.is_set():
                frame = read_frame(client, self.max_frame_size)
                reply = self._process(frame)
                self.stats["requests"] += 1
                write_frame(client, reply)
        except (EOFError, ConnectionError, TimeoutError, OSError):
            pass
        except (FrameTooLargeError, MalformedFrameError) as exc:
            self.stats["bad_frames"] += 1
            log.warning("%s: closing a connection that sent a bad frame: %s", self.name, exc)
        finally:
            with self._lock:
                self._clients.discard(client)
            client.close()

    def _process(self, frame: bytearray) -> bytes:
        """Decode one call, run it, encode the answer (``TProcessor.process``, split so that
        a request that does not decode is told apart from a handler that fails)."""
        processor = self._processor
        try:
            api, seqid, result, run = processor.process_in(_input_protocol(self._protocol_factory, frame))
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


def call(
    sock: socket.socket,
    service: Any,
    api: str,
    *args: Any,
    protocol_factory: Any = None,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    seqid: int = 0,
    deadline: float | None = None,
) -> Any:
    """Call ``api(*args)`` of ``service`` over a connected socket and return its result,
    the answer read by the ``time.monotonic()`` ``deadline`` if one is given. An exception
    the service declares is raised as its Thrift exception class.

    Raises ``EndpointUnavailableError`` when the peer goes away or times out,
    ``FrameTooLargeError`` / ``MalformedFrameError`` when its answer is not acceptable.
    """
    factory = protocol_factory or TCyBinaryProtocolFactory()  # type: ignore[no-untyped-call]
    out = TCyMemoryBuffer()
    oprot = factory.get_protocol(out)
    oprot.write_message_begin(api, TMessageType.CALL, seqid)
    call_args = getattr(service, api + "_args")(*args)
    call_args.write(oprot)
    oprot.write_message_end()
    try:
        write_frame(sock, out.getvalue())
        frame = read_frame(sock, max_frame_size, deadline)
    except (EOFError, OSError) as exc:
        raise EndpointUnavailableError(f"{api}: {exc or type(exc).__name__}") from None
    iprot = _input_protocol(factory, frame)
    try:
        name, mtype, rseqid = iprot.read_message_begin()
        if mtype == TMessageType.EXCEPTION:
            error = TApplicationException()
            error.read(iprot)
            raise MalformedFrameError(f"{api}: the endpoint answered an error: {error}")
        if name != api or rseqid != seqid:
            raise MalformedFrameError(f"answer to {name!r}#{rseqid} while calling {api!r}#{seqid}")
        result = getattr(service, api + "_result")()
        result.read(iprot)
        iprot.read_message_end()
    except MalformedFrameError:
        raise
    except Exception as exc:  # whatever the decoder raises on garbage
        raise MalformedFrameError(f"{api}: undecodable answer: {exc!r}") from None
    for field, value in vars(result).items():
        if field != "success" and value is not None:
            raise value  # an exception the service declares (``throws``)
    return result.success
