"""Flume's ``AvroSourceProtocol`` in Avro IPC: the handshake, calls and answers, encoded
and decoded with fastavro; the framing is :mod:`collector_agent.avro_transport`'s.

The protocol is ``flume.avpr`` beside this module, the exact text Avro's Java
``Protocol.toString()`` gives for Flume 1.11.0's ``flume.avdl`` (its license comment is the
protocol's ``doc``): a peer identifies a protocol by the MD5 of that text
(:data:`PROTOCOL_MD5`), so not a byte of it may change. A request is::

    [HandshakeRequest]  until the connection's handshake succeeded
    metadata            map<bytes>
    message name        string: "append", "appendBatch" ("" = handshake only)
    parameters          AvroFlumeEvent, or array<AvroFlumeEvent>

and its answer ``[HandshakeResponse] metadata, error flag (boolean), Status or error``.
A server knows a client when its ``clientHash`` is ours or its ``clientProtocol`` has our
types and messages (``doc`` aside); otherwise it answers ``NONE`` with its own protocol and
the client repeats the call with its text.

:func:`check_request` walks a request before anything is decoded and refuses
(:class:`~collector_agent.exceptions.RequestRefusedError`) one that passes a limit of the
Thrift source's :class:`~collector_agent.flume_limits.RequestLimits` (events per batch,
what decoding would allocate, estimated as :data:`OBJECT_COST` per event, header or
metadata entry plus their bytes), names another message, or runs past its frame's end.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro

from collector_agent.event import Event
from collector_agent.exceptions import RequestRefusedError
from collector_agent.flume_limits import RequestLimits

__all__ = [
    "AVRO_FLUME_EVENT",
    "OBJECT_COST",
    "PROTOCOL_MD5",
    "PROTOCOL_TEXT",
    "STATUS",
    "Handshake",
    "check_request",
    "decode_events",
    "encode_events",
    "known_protocol",
    "read_handshake_request",
    "read_handshake_response",
    "read_response",
    "write_call",
    "write_handshake_request",
    "write_handshake_response",
    "write_response",
]

PROTOCOL_TEXT = Path(__file__).with_name("flume.avpr").read_text(encoding="utf-8").rstrip("\n")
PROTOCOL_MD5 = hashlib.md5(PROTOCOL_TEXT.encode("utf-8")).digest()
STATUS = ("OK", "FAILED", "UNKNOWN")
OBJECT_COST = 64
_MAX_NAME = 256

_PROTOCOL = json.loads(PROTOCOL_TEXT)
# Flume's event record as the protocol declares it (named in the protocol's namespace): the
# one schema of an AvroFlumeEvent, also the value of Flume's Kafka records
_EVENT = {
    **next(t for t in _PROTOCOL["types"] if t["name"] == "AvroFlumeEvent"),
    "namespace": _PROTOCOL["namespace"],
}
AVRO_FLUME_EVENT = fastavro.parse_schema(_EVENT)
_BATCH_SCHEMA = fastavro.parse_schema({"type": "array", "items": _EVENT})
_MD5 = {"type": "fixed", "name": "MD5", "size": 16}
_META = ["null", {"type": "map", "values": "bytes"}]
_HANDSHAKE_REQUEST = fastavro.parse_schema(
    {
        "type": "record",
        "name": "org.apache.avro.ipc.HandshakeRequest",
        "fields": [
            {"name": "clientHash", "type": _MD5},
            {"name": "clientProtocol", "type": ["null", "string"]},
            {"name": "serverHash", "type": "MD5"},
            {"name": "meta", "type": _META},
        ],
    }
)
_HANDSHAKE_RESPONSE = fastavro.parse_schema(
    {
        "type": "record",
        "name": "org.apache.avro.ipc.HandshakeResponse",
        "fields": [
            {
                "name": "match",
                "type": {"type": "enum", "name": "HandshakeMatch", "symbols": ["BOTH", "CLIENT", "NONE"]},
            },
            {"name": "serverProtocol", "type": ["null", "string"]},
            {"name": "serverHash", "type": ["null", _MD5]},
            {"name": "meta", "type": _META},
        ],
    }
)


def _without_doc(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_doc(v) for k, v in value.items() if k != "doc"}
    if isinstance(value, list):
        return [_without_doc(v) for v in value]
    return value


_OURS = _without_doc(_PROTOCOL)


def known_protocol(text: str) -> bool:
    """Whether a peer's protocol ``text`` is ours, ``doc`` aside."""
    try:
        return bool(_without_doc(json.loads(text)) == _OURS)
    except ValueError:
        return False


@dataclasses.dataclass(frozen=True)
class Handshake:
    client_hash: bytes
    client_protocol: str | None
    server_hash: bytes


class _Walker:
    """A cursor over one message that reads Avro's building blocks and charges a budget."""

    def __init__(self, data: bytes, pos: int, budget: int) -> None:
        self.data, self.pos, self.budget, self.limit = data, pos, budget, budget

    def long(self) -> int:
        data, pos = self.data, self.pos
        result = shift = 0
        while True:
            if pos >= len(data):
                raise RequestRefusedError("a number runs past the frame's end")
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift > 63:
                raise RequestRefusedError("a number longer than 10 bytes")
        self.pos = pos
        return (result >> 1) ^ -(result & 1)

    def charge(self, cost: int, what: str) -> None:
        if cost > self.budget:
            raise RequestRefusedError(f"{what}: decoding would pass the limit of {self.limit} bytes")
        self.budget -= cost

    def skip(self, size: int, what: str) -> int:
        start = self.pos
        if size < 0 or start + size > len(self.data):
            raise RequestRefusedError(f"{what} of {size} bytes runs past the frame's end")
        self.pos = start + size
        return start

    def string(self, what: str) -> int:
        size = self.long()
        self.skip(size, what)
        self.charge(OBJECT_COST + size, what)
        return size

    def blocks(self, what: str, element: Callable[[], None], most: int | None = None) -> None:
        """Walk an array's or map's blocks, each block's count checked (the running total
        against ``most``) before its elements are walked."""
        total = 0
        while (count := self.long()) != 0:
            if count < 0:
                count = -count
                self.long()  # the block's size in bytes, unused
            total += count
            if most is not None and total > most:
                raise RequestRefusedError(f"{what} of more than {most} events")
            if count > len(self.data) - self.pos:
                raise RequestRefusedError(f"{what} declares {count} elements; fewer bytes are left")
            self.charge(count * OBJECT_COST, what)
            for _ in range(count):
                element()

    def union(self, what: str) -> bool:
        """A ``["null", X]`` union's branch: whether ``X`` follows."""
        branch = self.long()
        if branch not in (0, 1):
            raise RequestRefusedError(f"{what}: union branch {branch} of 2")
        return branch == 1

    def entry(self) -> None:
        """A map entry of a string or bytes value: two strings."""
        self.string("a map entry")
        self.string("a map entry")

    def event(self) -> None:
        self.blocks("an event's headers", self.entry)
        self.string("an event's body")


def check_request(data: bytes, pos: int, limits: RequestLimits) -> tuple[str, int]:
    """Walk the call that starts at ``pos`` (after any handshake): its message name and
    where its parameters start; refused as the module doc says."""
    walker = _Walker(data, pos, limits.max_decoded_bytes)
    walker.blocks("the call's metadata", walker.entry)
    size = walker.long()
    if not 0 <= size <= _MAX_NAME:
        raise RequestRefusedError(f"a message name of {size} bytes")
    start = walker.skip(size, "the message name")
    name = data[start : start + size].decode("utf-8", "replace")
    params = walker.pos
    if name == "appendBatch":
        walker.blocks("appendBatch", walker.event, limits.max_batch_events)
    elif name == "append":
        walker.charge(OBJECT_COST, "an event")
        walker.event()
    elif name:
        raise RequestRefusedError(f"message {name[:64]!r} is not in AvroSourceProtocol")
    if walker.pos != len(data):
        raise RequestRefusedError(f"{len(data) - walker.pos} bytes after the call's parameters")
    return name, params


def read_handshake_request(data: bytes, limits: RequestLimits) -> tuple[Handshake, int]:
    """The handshake at the start of a request, walked before it is decoded, and where the
    call after it starts."""
    walker = _Walker(data, 0, limits.max_decoded_bytes)
    walker.skip(16, "the client hash")
    if walker.union("the client protocol"):
        walker.string("the client protocol")
    walker.skip(16, "the server hash")
    if walker.union("the handshake's metadata"):
        walker.blocks("the handshake's metadata", walker.entry)
    stream = io.BytesIO(data)
    record = fastavro.schemaless_reader(stream, _HANDSHAKE_REQUEST, None)
    assert isinstance(record, dict)  # a record schema decodes to a dict
    handshake = Handshake(record["clientHash"], record["clientProtocol"], record["serverHash"])
    return handshake, stream.tell()


def write_handshake_request(out: io.BytesIO, *, with_protocol: bool) -> None:
    record = {
        "clientHash": PROTOCOL_MD5,
        "clientProtocol": PROTOCOL_TEXT if with_protocol else None,
        "serverHash": PROTOCOL_MD5,
        "meta": None,
    }
    fastavro.schemaless_writer(out, _HANDSHAKE_REQUEST, record)


def write_handshake_response(out: io.BytesIO, match: str) -> None:
    """``BOTH``, ``CLIENT`` or ``NONE``; ours, the protocol and hash, unless ``BOTH``."""
    both = match == "BOTH"
    record = {
        "match": match,
        "serverProtocol": None if both else PROTOCOL_TEXT,
        "serverHash": None if both else PROTOCOL_MD5,
        "meta": None,
    }
    fastavro.schemaless_writer(out, _HANDSHAKE_RESPONSE, record)


def read_handshake_response(stream: io.BytesIO) -> str:
    """The match of a server's handshake response; ``RequestRefusedError`` if the server
    speaks another protocol."""
    try:
        record: Any = fastavro.schemaless_reader(stream, _HANDSHAKE_RESPONSE, None)
    except Exception as exc:  # fastavro raises whatever the bytes lead it to
        raise RequestRefusedError(f"not an Avro handshake response: {exc!r}") from None
    server = record["serverProtocol"]
    if server is not None and not known_protocol(server):
        raise RequestRefusedError("the server speaks another protocol than AvroSourceProtocol")
    return str(record["match"])


def decode_events(data: bytes, params: int, name: str) -> list[Event]:
    """The events of a call :func:`check_request` passed."""
    stream = io.BytesIO(data)
    stream.seek(params)
    schema = AVRO_FLUME_EVENT if name == "append" else _BATCH_SCHEMA
    decoded: Any = fastavro.schemaless_reader(stream, schema, None)
    records: list[dict[str, Any]] = [decoded] if name == "append" else decoded
    return [Event(r["headers"], r["body"]) for r in records]


def encode_events(events: list[Event]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, _BATCH_SCHEMA, [{"headers": e.headers, "body": e.body} for e in events])
    return out.getvalue()


def write_call(out: io.BytesIO, name: str, params: bytes) -> None:
    """Empty metadata, the message name, its encoded parameters."""
    encoded = name.encode("utf-8")
    out.write(b"\x00" + _long(len(encoded)) + encoded + params)


def write_response(out: io.BytesIO, status: str | None, error: str | None = None) -> None:
    """Empty metadata, then a ``Status`` or a system error (the ``["string"]`` union)."""
    if error is None:
        out.write(b"\x00\x00" + _long(STATUS.index(status or "UNKNOWN")))
    else:
        encoded = error.encode("utf-8")
        out.write(b"\x00\x01\x00" + _long(len(encoded)) + encoded)


def read_response(stream: io.BytesIO) -> str:
    """The ``Status`` of an answer; ``RequestRefusedError`` naming a system error."""
    data = stream.read()
    walker = _Walker(data, 0, len(data) * OBJECT_COST + OBJECT_COST)
    walker.blocks("the answer's metadata", walker.entry)
    flag = walker.skip(1, "the error flag")
    if data[flag]:
        walker.long()
        size = walker.long()
        start = walker.skip(size, "the error")
        raise RequestRefusedError(
            f"the server answered an error: {data[start : start + size].decode(errors='replace')}"
        )
    index = walker.long()
    if not 0 <= index < len(STATUS):
        raise RequestRefusedError(f"the server answered status {index}")
    return STATUS[index]


def _long(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
