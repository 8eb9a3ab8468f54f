"""Flume's ``append``/``appendBatch`` calls in Thrift's compact protocol (Flume's default),
read and written in one pass without thriftpy2, whose compact codec is pure Python and builds
a ``ThriftFlumeEvent`` per event on the way: the source gets :class:`Event` objects straight
from the frame's bytes, the sink writes its events' bytes straight into the request.

:func:`read_call` takes only the layout every Thrift compact writer (Flume's Java, thriftpy2,
ours) gives these calls: the message header, then per event its ``headers`` (field 1, a map
of UTF-8 strings) and ``body`` (field 2) in that order, nothing else, nothing after the
arguments. It costs what :mod:`collector_agent.flume_limits` charges the same frame (events
per batch, decoded bytes) and answers ``None`` for anything else: a request past a limit,
an unknown field, a header that is not UTF-8, a length that runs past the frame. That
request then takes the general path (the limits' walk, which refuses it naming why, then
thriftpy2), so every frame the general path refuses or decodes otherwise still gets its
answer there.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from thriftpy2.protocol.compact import write_varint

from collector_agent.event import Event
from collector_agent.flume_limits import OBJECT_COST, RequestLimits

__all__ = ["read_call", "write_append_batch"]

_CALL_VERSION = (0x82, 0x21)  # protocol id; version 1, message type CALL
_HEADERS = 0x1B  # field 1 (delta 1), a map
_BODY = 0x18  # field 2 (delta 1), binary
_STRUCT_FIELD = 0x1C  # field 1 (delta 1), a struct: append's event
_LIST_FIELD = 0x19  # field 1 (delta 1), a list: appendBatch's events
_STRINGS = 0x88  # a map's key and value types: both binary
_LIST_OF_STRUCTS = 0x0C
_STOP = 0
_APIS = {b"append": "append", b"appendBatch": "appendBatch"}


class _Irregular(Exception):
    """Not the layout :func:`read_call` takes: the general path decides."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A varint of more than one byte at ``pos``: its value and the position after it."""
    result = shift = 0
    while shift < 64:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    raise _Irregular


def _after(data: bytes, pos: int, field: int) -> tuple[int, int]:
    """The varint after the field header ``field`` at ``pos``, and the position after it."""
    if data[pos] != field:
        raise _Irregular
    value = data[pos + 1]
    if value & 0x80:
        return _varint(data, pos + 1)
    return value, pos + 2


def _events(data: bytes, pos: int, count: int, budget: int) -> tuple[list[Event], int]:
    """``count`` events from ``pos`` costing no more than ``budget`` (checked as they are
    read: a map's declared size before its entries, the rest event by event), and the
    position after them."""
    events: list[Event] = []
    add = events.append
    cost = 0
    end = len(data)
    for _ in range(count):
        size, pos = _after(data, pos, _HEADERS)
        headers: dict[str, str] = {}
        if size:
            cost += OBJECT_COST * size
            if data[pos] != _STRINGS or cost > budget or 2 * size > end - pos:
                raise _Irregular
            pos += 1
            for _ in range(size):
                length = data[pos]
                pos += 1
                if length & 0x80:
                    length, pos = _varint(data, pos - 1)
                key = data[pos : pos + length].decode()
                pos += length
                cost += length
                length = data[pos]
                pos += 1
                if length & 0x80:
                    length, pos = _varint(data, pos - 1)
                headers[key] = data[pos : pos + length].decode()
                pos += length
                cost += 2 * OBJECT_COST + length
            if len(headers) != size or pos > end:  # a repeated key; a string past the end
                raise _Irregular
        length, pos = _after(data, pos, _BODY)
        body = data[pos : pos + length]
        pos += length
        if pos >= end or data[pos] != _STOP:
            raise _Irregular
        pos += 1
        cost += 2 * OBJECT_COST + length
        if cost > budget:
            raise _Irregular
        add(Event(headers, body))
    return events, pos


def read_call(frame: bytes | bytearray, limits: RequestLimits) -> tuple[str, int, list[Event]] | None:
    """``(api, seqid, events)`` of an ``append`` or ``appendBatch`` request frame of the
    regular layout within ``limits``, ``None`` for any other (see the module doc)."""
    data = bytes(frame)
    try:
        return _read(data, limits)
    except (_Irregular, IndexError, UnicodeDecodeError):
        return None


def _read(data: bytes, limits: RequestLimits) -> tuple[str, int, list[Event]] | None:
    if (data[0], data[1]) != _CALL_VERSION:
        return None
    seqid, pos = _varint(data, 2)
    size, pos = _varint(data, pos)
    api = _APIS.get(data[pos : pos + size])
    pos += size
    if api is None:
        return None
    cost = OBJECT_COST  # the arguments
    if api == "append":
        if data[pos] != _STRUCT_FIELD:
            return None
        count, pos = 1, pos + 1
    else:
        if data[pos] != _LIST_FIELD:
            return None
        header = data[pos + 1]
        count, pos = header >> 4, pos + 2
        if header & 0x0F != _LIST_OF_STRUCTS:
            return None
        if count == 15:
            count, pos = _varint(data, pos)
        cost += OBJECT_COST * count
        if count > limits.max_batch_events or cost > limits.max_decoded_bytes:
            return None
    events, pos = _events(data, pos, count, limits.max_decoded_bytes - cost)
    if data[pos] != _STOP or pos + 1 != len(data):
        return None
    return api, seqid, events


def _write_varint(value: int) -> bytes:
    out = io.BytesIO()
    write_varint(out, value)  # type: ignore[no-untyped-call]
    return out.getvalue()


_SMALL = [_write_varint(n) for n in range(1 << 14)]


def _length(value: int) -> bytes:
    return _SMALL[value] if value < len(_SMALL) else _write_varint(value)


def write_append_batch(events: Sequence[Event], seqid: int) -> bytes:
    """The compact-protocol ``appendBatch(events)`` request with sequence id ``seqid``."""
    count = len(events)
    head = [b"\x82\x21", _write_varint(seqid), b"\x0bappendBatch", bytes((_LIST_FIELD,))]
    if count < 15:
        head.append(bytes(((count << 4) | _LIST_OF_STRUCTS,)))
    else:
        head += (bytes((0xF0 | _LIST_OF_STRUCTS,)), _write_varint(count))
    parts = [b"".join(head)]
    add, length = parts.append, _length
    strings: dict[str, bytes] = {}
    for event in events:
        headers = event.headers
        if headers:
            add(b"\x1b" + length(len(headers)) + b"\x88")
            for key, value in headers.items():
                encoded = strings.get(key)
                if encoded is None:
                    raw = key.encode()
                    encoded = strings[key] = length(len(raw)) + raw
                raw = value.encode()
                add(encoded + length(len(raw)) + raw)
        else:
            add(b"\x1b\x00")
        body = event.body
        add(b"\x18" + length(len(body)))
        add(body)
        add(b"\x00")
    add(b"\x00")
    return b"".join(parts)
