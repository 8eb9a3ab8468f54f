"""Thrift messages as frames: a 4-byte big-endian length, then the message.

Frames longer than ``max_frame_size`` or not positive are refused before any byte of them is
buffered, and a frame's buffer grows with the bytes that arrive, never to what its length
announces. Decoding reads from a stream that ends at the frame's end, so a length field
inside a message that claims more bytes than the frame holds fails at once with an
end-of-file error instead of allocating what it claims. :func:`call` is one Thrift call
over a connected socket in these frames (the client side of
:class:`~bookkeeper.wire.FramedThriftServer`).
"""

from __future__ import annotations

import io
import socket
import struct
import time
from typing import Any

from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.thrift import TApplicationException, TMessageType
from thriftpy2.transport import TCyBufferedTransport, TCyMemoryBuffer

from bookkeeper.exceptions import EndpointUnavailableError, FrameTooLargeError, MalformedFrameError

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "call",
    "encode_call",
    "exchange",
    "frame_size",
    "input_protocol",
    "read_frame",
    "recv_exact",
    "write_frame",
]

DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024
_HEADER = struct.Struct("!i")
_FIRST_CHUNK = 64 * 1024
_ZEROS = memoryview(bytes(1024 * 1024))


def recv_exact(sock: socket.socket, size: int, deadline: float | None) -> bytearray:
    """``size`` bytes, by the ``time.monotonic()`` ``deadline`` if given. The buffer grows
    with the bytes that arrive (from 64 KiB, by at most 1 MiB at a time), so a peer that
    announces a large frame and trickles it holds memory for what it sent, not what it
    announced."""
    data = bytearray()
    got = 0
    while got < size:
        if got == len(data):
            data += _ZEROS[: min(size - got, max(_FIRST_CHUNK, min(got, len(_ZEROS))))]
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"deadline passed after {got} of {size} bytes")
            sock.settimeout(left)
        # one expression: the view is released before the buffer grows again
        n = sock.recv_into(memoryview(data)[got:])
        if n == 0:
            raise EOFError(f"connection closed after {got} of {size} bytes")
        got += n
    return data


def frame_size(header: bytes | bytearray, max_frame_size: int) -> int:
    """The length a frame's header announces; refused if not positive or over ``max_frame_size``."""
    (size,) = _HEADER.unpack(header)
    if size <= 0:
        raise MalformedFrameError(f"frame length {size} is not positive")
    if size > max_frame_size:
        raise FrameTooLargeError(f"frame of {size} bytes exceeds the maximum of {max_frame_size}")
    return int(size)


def read_frame(sock: socket.socket, max_frame_size: int, deadline: float | None = None) -> bytearray:
    """Read one frame; ``EOFError`` on a clean close, ``TimeoutError`` past the socket's
    timeout or the ``time.monotonic()`` deadline, ``FrameTooLargeError`` or
    ``MalformedFrameError`` on a bad length (nothing of the body is read then)."""
    size = frame_size(recv_exact(sock, 4, deadline), max_frame_size)
    return recv_exact(sock, size, deadline)


def write_frame(sock: socket.socket, payload: bytes) -> None:
    """Send one frame (length prefix and payload in one ``sendall``)."""
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def input_protocol(protocol_factory: Any, frame: bytes | bytearray) -> Any:
    """A protocol decoding ``frame`` from a stream that ends where the frame does."""
    return protocol_factory.get_protocol(TCyBufferedTransport(io.BytesIO(frame)))


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
    request = encode_call(factory, service, api, args, seqid)
    return exchange(sock, service, api, request, factory, max_frame_size, seqid, deadline)


def encode_call(protocol_factory: Any, service: Any, api: str, args: tuple[Any, ...], seqid: int) -> bytes:
    """The message calling ``api(*args)`` of ``service``."""
    out = TCyMemoryBuffer()
    oprot = protocol_factory.get_protocol(out)
    oprot.write_message_begin(api, TMessageType.CALL, seqid)
    getattr(service, api + "_args")(*args).write(oprot)
    oprot.write_message_end()
    return bytes(out.getvalue())


def exchange(
    sock: socket.socket,
    service: Any,
    api: str,
    request: bytes,
    protocol_factory: Any,
    max_frame_size: int,
    seqid: int,
    deadline: float | None,
) -> Any:
    """Send ``request``, the encoded call ``api`` with ``seqid``, and read its answer as
    :func:`call` does."""
    try:
        write_frame(sock, request)
        frame = read_frame(sock, max_frame_size, deadline)
    except (EOFError, OSError) as exc:
        raise EndpointUnavailableError(f"{api}: {exc or type(exc).__name__}") from None
    iprot = input_protocol(protocol_factory, frame)
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
