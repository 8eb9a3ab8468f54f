"""Protobuf bodies measured before they are parsed: what a parse would allocate, bounded.

The protobuf runtime (upb) parses a whole message at once, with no limit on how many
elements a repeated field holds; each element costs it 50-60 bytes however few it took on
the wire (an empty sub-message is 2 bytes: 2M of them took 107 MB), so a body of empty
elements makes any decompressed-size limit 25-30 times larger in memory. The receivers
therefore count first and parse after, and these functions count by reading only tags and
lengths (the runtime has no public wire walker), guided by the message's descriptor:

- :func:`top_level` walks the fields of one message without descending, for a receiver
  that parses a request entry by entry (remote write 1.0, one series at a time);
- :func:`count_elements` counts what a whole parse would allocate, and what the count
  itself reads: every field it steps over (a message, a string, a number, an unknown
  field) and every number of a packed varint field (4-8 bytes each in memory from a
  single byte on the wire), descending into sub-messages that hold anything but scalars,
  and stops at the first one past ``budget``.

Both raise :class:`WireError` (a ``ValueError``) for bytes that are not protobuf: a
truncated varint or length, a field number 0, a wire type 3, 4, 6 or 7 (groups are
proto2-only and none of the receivers' messages has one), nesting deeper than
:data:`MAX_DEPTH`.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import numpy as np
from google.protobuf.descriptor import Descriptor, FieldDescriptor

__all__ = ["MAX_DEPTH", "ElementBudgetExceeded", "WireError", "count_elements", "top_level"]

MAX_DEPTH = 32  # the runtime's own default recursion limit is 100; no receiver's message nests past 8

Buffer = bytes | bytearray

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_CHUNK = 1 << 20
# how a field's occurrences cost: a message (descended into), a string or bytes, packed varints
_MESSAGE, _STRING, _PACKED_VARINT, _SCALAR = 0, 1, 2, 3
_VARINT_TYPES = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_BOOL,
    FieldDescriptor.TYPE_ENUM,
}


class WireError(ValueError):
    """Bytes that are not a protobuf message; the message says where."""


class ElementBudgetExceeded(ValueError):
    """A body that holds more elements than its budget (``budget`` in the message)."""

    def __init__(self, budget: int) -> None:
        super().__init__(f"more than {budget:,} elements")
        self.budget = budget


def _varint(data: Buffer, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            break
    raise WireError(f"a truncated or overlong varint before byte {pos}")


def top_level(data: Buffer, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, int, int]]:
    """``(field number, wire type, value start, value end)`` of each field in
    ``data[start:end]``; a varint's value is not decoded (``value end`` is after it)."""
    end = len(data) if end is None else end
    pos = start
    while pos < end:
        tag = data[pos]
        if tag & 0x80:
            tag, pos = _varint(data, pos, end)
        else:
            pos += 1
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise WireError(f"field number 0 at byte {pos - 1}")
        if wire == _LEN:
            length, pos = _varint(data, pos, end)
            value_end = pos + length
        elif wire == _VARINT:
            _, value_end = _varint(data, pos, end)
        elif wire == _FIXED64:
            value_end = pos + 8
        elif wire == _FIXED32:
            value_end = pos + 4
        else:
            raise WireError(f"wire type {wire} (field {number}) at byte {pos - 1}")
        if value_end > end:
            raise WireError(f"field {number} runs past its message's end (byte {end})")
        yield number, wire, pos, value_end
        pos = value_end


@cache
def _plan(descriptor: Descriptor) -> tuple[dict[int, tuple[int, Descriptor | None]], bool]:
    """Each field number's cost kind, and whether the message holds anything that costs
    (a message of scalars only, as a sample, is skipped whole)."""
    plan: dict[int, tuple[int, Descriptor | None]] = {}
    for field in descriptor.fields:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            plan[field.number] = (_MESSAGE, field.message_type)
        elif field.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
            plan[field.number] = (_STRING, None)
        elif field.type in _VARINT_TYPES and field.label == FieldDescriptor.LABEL_REPEATED:
            plan[field.number] = (_PACKED_VARINT, None)
        else:
            plan[field.number] = (_SCALAR, None)
    return plan, any(kind != _SCALAR for kind, _ in plan.values())


def count_elements(
    data: Buffer, descriptor: Descriptor, budget: int, start: int = 0, end: int | None = None
) -> int:
    """The elements a parse of ``data[start:end]`` as ``descriptor`` would allocate (module
    doc); :class:`ElementBudgetExceeded` as soon as they pass ``budget``."""
    counter = _Counter(data, budget)
    counter.walk(descriptor, start, len(data) if end is None else end, 0)
    return counter.count


class _Counter:
    def __init__(self, data: Buffer, budget: int) -> None:
        self.data = data
        self.budget = budget
        self.count = 0

    def add(self, count: int) -> None:
        self.count += count
        if self.count > self.budget:
            raise ElementBudgetExceeded(self.budget)

    def walk(self, descriptor: Descriptor, start: int, end: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise WireError(f"messages nested deeper than {MAX_DEPTH}")
        plan, _ = _plan(descriptor)
        for number, wire, value_start, value_end in top_level(self.data, start, end):
            kind, sub = plan.get(number, (_SCALAR, None))
            self.add(1)
            if wire != _LEN or kind == _SCALAR:
                continue
            if kind == _PACKED_VARINT:
                self._varints(value_start, value_end)
            elif kind == _MESSAGE and sub is not None and _plan(sub)[1]:
                self.walk(sub, value_start, value_end, depth + 1)

    def _varints(self, start: int, end: int) -> None:
        # every varint ends with the one byte of its run whose top bit is clear; counted a
        # MiB at a time, so that a long run stops at the budget and costs a MiB of memory
        for chunk in range(start, end, _CHUNK):
            count = min(_CHUNK, end - chunk)
            view = np.frombuffer(self.data, dtype=np.uint8, count=count, offset=chunk)
            self.add(int(np.count_nonzero(view < 0x80)))
