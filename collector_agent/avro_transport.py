"""Avro IPC's Netty framing over a socket, optionally inside a zlib stream (Flume's
``compression-type = deflate``).

Avro's ``NettyTransceiver`` and ``NettyServer`` exchange *data packs*::

    +-----------+-----------+----------------+-------+-----+----------------+-------+
    | serial    | count     | length 1       | bytes | ... | length count   | bytes |
    | int32 BE  | int32 BE  | int32 BE       |       |     | int32 BE       |       |
    +-----------+-----------+----------------+-------+-----+----------------+-------+

The serial pairs an answer with its request; the buffers, concatenated, are one Avro IPC
message (Java cuts it every 8 KiB). With deflate, Flume puts Netty's ``JZlibEncoder`` and
``JZlibDecoder`` first in the pipeline: each direction of the connection is one zlib
stream (RFC 1950), flushed (``Z_SYNC_FLUSH``) after every write. Flume 1.11's client with
``ssl`` as well puts its TLS records *inside* the zlib stream (the first bytes on the wire
are ``78 9c``, inflating to a TLS ClientHello): :func:`deflate_setting` refuses the two
together rather than speak a layering only Flume's Netty pipeline has.

Refused (:class:`bookkeeper.MalformedFrameError`, :class:`bookkeeper.FrameTooLargeError`;
the connection is then closed): a count below 1 or above :data:`MAX_BUFFERS`, a negative
length, buffers that add up past ``max_frame_size``, bytes that do not inflate. The buffer
grows with the bytes that arrive (inflated at most :data:`_CHUNK` at a time), never to what
a header announces.
"""

from __future__ import annotations

import socket
import struct
import time
import zlib

from bookkeeper import FrameTooLargeError, MalformedFrameError
from collector_agent.context import Context

__all__ = ["MAX_BUFFERS", "FrameStream", "deflate_setting"]

MAX_BUFFERS = 1 << 16
_CHUNK = 64 * 1024
_INT = struct.Struct("!i")
_PAIR = struct.Struct("!ii")


def deflate_setting(context: Context) -> bool:
    """Whether ``compression-type`` says ``deflate`` (else ``none``); refused beside ``ssl``
    (see the module doc)."""
    compression = context.get_str("compression-type", "none").strip().lower()
    if compression not in ("none", "deflate"):
        raise context.error("compression-type", f"{compression!r} is neither none nor deflate")
    if compression == "deflate" and context.get_bool("ssl", False):
        raise context.error(
            "compression-type", "deflate with ssl: Flume runs TLS inside the zlib stream, not supported"
        )
    return compression == "deflate"


class FrameStream:
    """Data packs read from and written to ``sock``; ``deflate`` wraps both directions in a
    zlib stream at ``level``. Reads take a ``time.monotonic()`` deadline."""

    def __init__(self, sock: socket.socket, *, deflate: bool = False, level: int = 6) -> None:
        self.sock = sock
        self._buffer = bytearray()
        self._inflater = zlib.decompressobj() if deflate else None
        self._deflater = zlib.compressobj(level) if deflate else None

    def _fill(self, size: int, deadline: float) -> None:
        """Until ``size`` bytes are buffered; ``EOFError`` if the peer closes first."""
        inflater = self._inflater
        while len(self._buffer) < size:
            if inflater is not None and inflater.unconsumed_tail:
                self._buffer += self._inflate(inflater.unconsumed_tail)
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"deadline passed with {len(self._buffer)} of {size} bytes")
            self.sock.settimeout(left)
            chunk = self.sock.recv(_CHUNK)
            if not chunk:
                raise EOFError(f"connection closed with {len(self._buffer)} of {size} bytes")
            self._buffer += chunk if inflater is None else self._inflate(chunk)

    def _inflate(self, data: bytes) -> bytes:
        assert self._inflater is not None  # only called with deflate on
        try:
            out = self._inflater.decompress(data, _CHUNK)
        except zlib.error as exc:
            raise MalformedFrameError(f"the zlib stream does not inflate: {exc}") from None
        if self._inflater.eof:
            raise EOFError("the peer ended its zlib stream")
        return out

    def _take(self, size: int, deadline: float) -> bytes:
        self._fill(size, deadline)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def wait_first_byte(self, deadline: float) -> None:
        """Block until a pack starts (``TimeoutError`` past ``deadline``)."""
        self._fill(1, deadline)

    def read(self, max_frame_size: int, deadline: float) -> tuple[int, bytes]:
        """One pack within ``deadline``: its serial and its buffers joined."""
        serial, count = _PAIR.unpack(self._take(8, deadline))
        if not 1 <= count <= MAX_BUFFERS:
            raise MalformedFrameError(f"a frame of {count} buffers (1 to {MAX_BUFFERS})")
        parts, total = [], 0
        for _ in range(count):
            (length,) = _INT.unpack(self._take(4, deadline))
            total += length + 4
            if length < 0:
                raise MalformedFrameError(f"a frame buffer of {length} bytes")
            if total > max_frame_size:
                raise FrameTooLargeError(
                    f"a frame buffer of {length} bytes (frame at {total} of at most {max_frame_size})"
                )
            parts.append(self._take(length, deadline))
        return serial, b"".join(parts)

    def write(self, serial: int, message: bytes, deadline: float) -> None:
        """``message`` as one pack of a single buffer, within ``deadline``."""
        data = _PAIR.pack(serial, 1) + _INT.pack(len(message)) + message
        if self._deflater is not None:
            data = self._deflater.compress(data) + self._deflater.flush(zlib.Z_SYNC_FLUSH)
        self.sock.settimeout(max(0.001, deadline - time.monotonic()))
        self.sock.sendall(data)
