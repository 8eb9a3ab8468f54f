"""Bounds on a Flume ``ThriftSourceProtocol`` request, checked before it is decoded.

thriftpy2 builds an object per list element, map entry and struct as it decodes, from
counts the sender declares: a 4 MB ``appendBatch`` of empty events (a byte each in the
compact protocol) becomes 4 million Python objects, a gigabyte. So the Thrift source walks
each request frame first, in the frame's own protocol (compact or binary), without building
anything, and refuses it (:class:`~collector_agent.exceptions.RequestRefusedError`) when:

- the message header is not a ``CALL`` of the compact or binary protocol;
- ``appendBatch`` has no ``events`` list, or the list declares more than
  ``max_batch_events`` events (refused from the declared count, before any event is read);
  ``append`` has no ``event``;
- an event lacks one of the fields Flume's IDL makes ``required``, ``headers`` (a map of
  strings) and ``body`` (binary), or carries them with another type;
- what decoding would allocate passes ``max_decoded_bytes``, estimated as
  :data:`OBJECT_COST` bytes per object (a struct, a string, a list element or map entry)
  plus the bytes of every string; a container is refused from its declared count when
  that count alone passes what is left;
- a container declares more elements than the bytes left in the frame could hold, a length
  runs past the frame's end, or values nest deeper than :data:`MAX_DEPTH`.

Fields the IDL does not know are skipped under the same budget. Walking costs a few Python
operations per header and event, less than thriftpy2's own decoding of the compact
protocol.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import ClassVar

from thriftpy2.thrift import TType

from collector_agent.exceptions import RequestRefusedError

__all__ = ["MAX_DEPTH", "OBJECT_COST", "RequestLimits", "check_request"]

# What one decoded Python object costs, about: a struct, a str, a list slot or a dict entry
# (96 bytes an empty event, 100 a header of short strings, measured in thriftpy2).
OBJECT_COST = 64
MAX_DEPTH = 16

_STOP, _BOOL, _BYTE, _DOUBLE = TType.STOP, TType.BOOL, TType.BYTE, TType.DOUBLE
_I16, _I32, _I64, _STRING = TType.I16, TType.I32, TType.I64, TType.STRING
_STRUCT, _MAP, _SET, _LIST = TType.STRUCT, TType.MAP, TType.SET, TType.LIST
_UUID = 16  # Thrift 0.19's, unknown to thriftpy2: skipped here, refused by its decoder
_CALL = 1
_FIXED = {_BOOL: 1, _BYTE: 1, _DOUBLE: 8, _I16: 2, _I32: 4, _I64: 8, _UUID: 16}


@dataclasses.dataclass(frozen=True)
class RequestLimits:
    """``max_batch_events``: events in one ``appendBatch``; ``max_decoded_bytes``: what
    decoding one request may allocate, estimated (see the module doc)."""

    max_batch_events: int = 10_000
    max_decoded_bytes: int = 64 * 1024 * 1024


class _Walker:
    """A cursor over one frame that reads Thrift's building blocks and charges the budget.
    Subclasses read one protocol; every read past the frame's end is refused."""

    # The fewest bytes an element of each type takes in this protocol.
    min_size: ClassVar[dict[int, int]] = {}

    def __init__(self, frame: bytes | bytearray, limits: RequestLimits) -> None:
        self.data = frame
        self.pos = 0
        self.budget = limits.max_decoded_bytes
        self.limits = limits

    def need(self, size: int, what: str) -> int:
        start = self.pos
        if size < 0 or start + size > len(self.data):
            raise RequestRefusedError(f"{what} of {size} bytes runs past the frame's end")
        self.pos = start + size
        return start

    def charge(self, count: int, each: int, what: str) -> None:
        cost = count * each
        if cost > self.budget:
            raise RequestRefusedError(
                f"{what}: decoding would pass the limit of {self.limits.max_decoded_bytes} bytes"
            )
        self.budget -= cost

    def container(self, count: int, types: tuple[int, ...], what: str) -> None:
        """Refuse a declared ``count`` the frame cannot hold or the budget cannot pay."""
        if count < 0:
            raise RequestRefusedError(f"{what} declares {count} elements")
        least = sum(self.min_size.get(t, 1) for t in types)
        if count * least > len(self.data) - self.pos:
            raise RequestRefusedError(
                f"{what} declares {count} elements; the {len(self.data) - self.pos} bytes left hold fewer"
            )
        self.charge(count, OBJECT_COST, f"{what} of {count} elements")

    def string(self, what: str) -> int:
        """Skip a string or binary; its length."""
        size = self.length()
        self.need(size, what)
        self.charge(1, OBJECT_COST + size, what)
        return size

    def skip(self, ttype: int, depth: int) -> None:
        if depth > MAX_DEPTH:  # a decoder recurses as deep: bounded here, not by Python's stack
            raise RequestRefusedError(f"values nested deeper than {MAX_DEPTH}")
        if ttype in _FIXED:
            self.skip_fixed(ttype)
        elif ttype == _STRING:
            self.string("a string")
        elif ttype == _STRUCT:
            self.skip_struct(depth + 1)
        elif ttype == _MAP:
            count, key, value = self.map_begin()
            self.container(count, (key, value), "a map")
            for _ in range(count):
                self.skip(key, depth + 1)
                self.skip(value, depth + 1)
        elif ttype in (_LIST, _SET):
            element, count = self.list_begin()
            self.container(count, (element,), "a list")
            for _ in range(count):
                self.skip(element, depth + 1)
        else:
            raise RequestRefusedError(f"unknown Thrift type {ttype}")

    def skip_struct(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise RequestRefusedError(f"values nested deeper than {MAX_DEPTH}")
        self.charge(1, OBJECT_COST, "a struct")
        self.struct_begin()
        while True:
            ttype, _ = self.field()
            if ttype == _STOP:
                return
            self.skip(ttype, depth)

    # -- the protocol's own encoding ---------------------------------------------------------

    def message_begin(self) -> tuple[str, int]:
        raise NotImplementedError

    def struct_begin(self) -> None:
        """Reset what a field header is relative to (compact)."""

    def field(self) -> tuple[int, int]:
        raise NotImplementedError

    def map_begin(self) -> tuple[int, int, int]:
        raise NotImplementedError

    def list_begin(self) -> tuple[int, int]:
        raise NotImplementedError

    def length(self) -> int:
        raise NotImplementedError

    def skip_fixed(self, ttype: int) -> None:
        raise NotImplementedError


_I16_BE = struct.Struct("!h")
_I32_BE = struct.Struct("!i")


class _Binary(_Walker):
    min_size: ClassVar[dict[int, int]] = {**_FIXED, _STRING: 4, _STRUCT: 1, _MAP: 6, _SET: 5, _LIST: 5}

    def message_begin(self) -> tuple[str, int]:
        (first,) = _I32_BE.unpack_from(self.data, self.need(4, "the message header"))
        if first < 0:
            if first & 0xFFFF0000 != 0x80010000:
                raise RequestRefusedError(f"binary protocol version {first & 0xFFFF0000:#x} is not 1")
            mtype = first & 0xFF
            name = self._name(self.length())
            self.need(4, "the sequence id")
        else:  # the old non-strict header: the name first
            name = self._name(first)
            mtype = self.data[self.need(1, "the message type")]
            self.need(4, "the sequence id")
        return name, mtype

    def _name(self, size: int) -> str:
        if size > 256:
            raise RequestRefusedError(f"a method name of {size} bytes")
        start = self.need(size, "the method name")
        return bytes(self.data[start : start + size]).decode("utf-8", "replace")

    def field(self) -> tuple[int, int]:
        ttype = self.data[self.need(1, "a field header")]
        if ttype == _STOP:
            return _STOP, 0
        (fid,) = _I16_BE.unpack_from(self.data, self.need(2, "a field id"))
        return ttype, fid

    def map_begin(self) -> tuple[int, int, int]:
        start = self.need(6, "a map header")
        (count,) = _I32_BE.unpack_from(self.data, start + 2)
        return count, self.data[start], self.data[start + 1]

    def list_begin(self) -> tuple[int, int]:
        start = self.need(5, "a list header")
        (count,) = _I32_BE.unpack_from(self.data, start + 1)
        return self.data[start], count

    def length(self) -> int:
        (size,) = _I32_BE.unpack_from(self.data, self.need(4, "a length"))
        return int(size)

    def skip_fixed(self, ttype: int) -> None:
        self.need(_FIXED[ttype], "a number")


# Compact type codes to Thrift's (1 and 2 are a boolean's two values).
_COMPACT_TYPES = {
    0: _STOP,
    1: _BOOL,
    2: _BOOL,
    3: _BYTE,
    4: _I16,
    5: _I32,
    6: _I64,
    7: _DOUBLE,
    8: _STRING,
    9: _LIST,
    10: _SET,
    11: _MAP,
    12: _STRUCT,
    13: _UUID,
}


class _Compact(_Walker):
    min_size: ClassVar[dict[int, int]] = {
        _BOOL: 1,
        _BYTE: 1,
        _DOUBLE: 8,
        _UUID: 16,
    }  # every other type takes a byte or more

    def __init__(self, frame: bytes | bytearray, limits: RequestLimits) -> None:
        super().__init__(frame, limits)
        self.last_field: list[int] = [0]
        self.bool_in_header = False

    def varint(self) -> int:
        result = shift = 0
        while True:
            byte = self.data[self.need(1, "a varint")]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise RequestRefusedError("a varint longer than 10 bytes")

    def message_begin(self) -> tuple[str, int]:
        start = self.need(2, "the message header")
        if self.data[start] != 0x82 or self.data[start + 1] & 0x1F != 1:
            raise RequestRefusedError("not a compact protocol message of version 1")
        mtype = self.data[start + 1] >> 5
        self.varint()  # the sequence id
        size = self.length()
        if size > 256:
            raise RequestRefusedError(f"a method name of {size} bytes")
        begin = self.need(size, "the method name")
        return bytes(self.data[begin : begin + size]).decode("utf-8", "replace"), mtype

    def struct_begin(self) -> None:
        self.last_field.append(0)

    def field(self) -> tuple[int, int]:
        byte = self.data[self.need(1, "a field header")]
        if byte == 0:
            self.last_field.pop()
            return _STOP, 0
        code = byte & 0x0F
        if code not in _COMPACT_TYPES or code == 0:
            raise RequestRefusedError(f"unknown compact type {code}")
        delta = byte >> 4
        if delta:
            fid = self.last_field[-1] + delta
        else:
            raw = self.varint()
            fid = (raw >> 1) ^ -(raw & 1)
        self.last_field[-1] = fid
        self.bool_in_header = code in (1, 2)  # a boolean field's value is its header
        return _COMPACT_TYPES[code], fid

    def map_begin(self) -> tuple[int, int, int]:
        count = self.varint()
        if count == 0:
            return 0, _STRING, _STRING
        types = self.data[self.need(1, "a map's types")]
        return count, self._type(types >> 4), self._type(types & 0x0F)

    def list_begin(self) -> tuple[int, int]:
        byte = self.data[self.need(1, "a list header")]
        count = byte >> 4
        if count == 15:
            count = self.varint()
        return self._type(byte & 0x0F), count

    def _type(self, code: int) -> int:
        if code not in _COMPACT_TYPES or code == 0:
            raise RequestRefusedError(f"unknown compact type {code}")
        return _COMPACT_TYPES[code]

    def length(self) -> int:
        return self.varint()

    def skip(self, ttype: int, depth: int) -> None:
        if ttype == _BOOL and self.bool_in_header:
            self.bool_in_header = False
            return
        super().skip(ttype, depth)

    def skip_fixed(self, ttype: int) -> None:
        if ttype in (_I16, _I32, _I64):
            self.varint()
        else:
            self.need(_FIXED[ttype], "a number")


def _event(walker: _Walker, depth: int) -> None:
    """One ``ThriftFlumeEvent``: ``headers`` (1, map<string, string>) and ``body`` (2,
    binary) both present, anything else skipped."""
    walker.charge(1, OBJECT_COST, "an event")
    walker.struct_begin()
    seen = 0
    while True:
        ttype, fid = walker.field()
        if ttype == _STOP:
            break
        if fid == 1 and ttype == _MAP:
            count, key, value = walker.map_begin()
            if count and (key, value) != (_STRING, _STRING):
                raise RequestRefusedError("an event's headers are not a map of strings")
            walker.container(count, (key, value), "an event's headers")
            for _ in range(2 * count):
                walker.string("a header")
            seen |= 1
        elif fid == 2 and ttype == _STRING:
            walker.string("an event's body")
            seen |= 2
        elif fid in (1, 2):
            raise RequestRefusedError(f"an event's field {fid} has Thrift type {ttype}")
        else:
            walker.skip(ttype, depth)
    if seen != 3:
        missing = " and ".join(n for bit, n in ((1, "headers"), (2, "body")) if not seen & bit)
        raise RequestRefusedError(f"an event without its required {missing}")


def _arguments(walker: _Walker, api: str) -> None:
    walker.charge(1, OBJECT_COST, "the arguments")
    walker.struct_begin()
    found = False
    while True:
        ttype, fid = walker.field()
        if ttype == _STOP:
            break
        if fid == 1 and api == "appendBatch" and ttype == _LIST:
            element, count = walker.list_begin()
            if count > walker.limits.max_batch_events:
                raise RequestRefusedError(
                    f"appendBatch of {count} events exceeds the maximum of {walker.limits.max_batch_events}"
                )
            if count and element != _STRUCT:
                raise RequestRefusedError(f"appendBatch's events have Thrift type {element}")
            walker.container(count, (_STRUCT,), "appendBatch's events")
            for _ in range(count):
                _event(walker, 1)
            found = True
        elif fid == 1 and api == "append" and ttype == _STRUCT:
            _event(walker, 1)
            found = True
        else:
            walker.skip(ttype, 0)
    if not found:
        raise RequestRefusedError(f"{api} without its {'events' if api == 'appendBatch' else 'event'}")


def check_request(frame: bytes | bytearray, compact: bool, limits: RequestLimits) -> None:
    """Refuse (``RequestRefusedError``, naming why) a request frame that breaks Flume's IDL
    or ``limits``; see the module doc."""
    walker: _Walker = _Compact(frame, limits) if compact else _Binary(frame, limits)
    api, mtype = walker.message_begin()
    if mtype != _CALL:
        raise RequestRefusedError(f"message type {mtype} is not a call")
    if api in ("append", "appendBatch"):
        _arguments(walker, api)
    else:  # thriftpy2 answers UNKNOWN_METHOD, after skipping what was bounded here
        walker.skip_struct(0)
