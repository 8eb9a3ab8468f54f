"""How the ``file`` channel stores the events of one put transaction: the ``data`` blob of a
``batches`` row, by the row's ``format``.

Format 2, checksummed (every row written since checksums came), little-endian::

    +--------------------+--------------------------------------------+
    | u32 crc32c(index)  | index: count x u32, where frame i ends      |
    +--------------------+--------------------------------------------+
    | frame 0 | frame 1 | ... | frame count-1                          |
    +---------------------------------------------------------------+

    frame = +--------------+------------+--------------+------+------------------------+
            | u32 headers  | u32 body   | headers JSON | body | u32 crc32c of the      |
            | length       | length     | (UTF-8)      |      | frame's bytes before it|
            +--------------+------------+--------------+------+------------------------+

An index entry counts from the first frame. The checksum is CRC32C (Castagnoli, as iSCSI,
ext4 and Kafka use; ``google-crc32c``'s C code, about 0.2 µs per KiB). The index lets a
reader find every frame even when the lengths of one are damaged; when the index itself is
damaged, the frames are walked by their own lengths.

Format 1 (rows written before checksums): the frames alone, without checksum or index.
Nothing tells a damaged byte there from a good one but the framing.

Reading never raises: each of the ``count`` events comes back as ``(headers JSON, body)``
or as :class:`Damaged`, with the reason and the stored bytes of that event (for the
dead-letter file). The reasons:

- ``checksum mismatch``: the frame's bytes are not what was written;
- ``frame lengths do not fit``: its lengths disagree with the index or run past the blob;
- ``unlocatable``: index and lengths both damaged before this event: it and the rest of the
  batch are one damaged span (its bytes ride on the first of them);
- ``batch shorter than its index``, ``unknown format <n>``, and for format 1 ``frames end
  at <n>, the blob has <m> bytes``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import google_crc32c
import orjson

from collector_agent.event import Event

__all__ = ["CHECKSUMMED", "LEGACY", "Damaged", "Stored", "pack_events", "unpack_events"]

LEGACY = 1
CHECKSUMMED = 2

_LENGTHS = struct.Struct("<II")
_U32 = struct.Struct("<I")
_FRAME_OVERHEAD = _LENGTHS.size + _U32.size
# CRC32C of any bytes followed by their own CRC32C (little-endian) is this constant: a frame
# is as written iff its checksum, stored one included, comes out as it (one call, no unpack)
_RESIDUE = 0x48674BC7


@dataclass(frozen=True)
class Damaged:
    """An event that cannot be delivered as stored: why, and the bytes that were there."""

    reason: str
    raw: bytes


# an event as read back: (headers JSON, body), or why it cannot be
Stored = tuple[bytes, bytes] | Damaged


def pack_events(events: Sequence[Event]) -> bytes:
    """The format-2 blob of ``events``.

    A frame's bytes before its body (the lengths and the headers JSON) and their checksum
    are worked out once per run of events with equal headers and body length, so each
    event of a run costs one checksum extension over its body. Events whose headers are
    equal as dicts share one encoding: their order of keys is the first one's."""
    frames: list[bytes] = []
    ends: list[int] = []
    add, add_end, u32, extend = frames.append, ends.append, _U32.pack, google_crc32c.extend
    lengths, value = _LENGTHS.pack, google_crc32c.value
    last_headers: dict[str, str] | None = None
    last_length = -1
    prefix, state, size, end = b"", 0, 0, 0
    for event in events:
        body = event.body
        headers = event.headers
        if len(body) != last_length or headers != last_headers:
            last_headers, last_length = headers, len(body)
            encoded = _json(headers)
            prefix = lengths(len(encoded), last_length) + encoded
            state, size = value(prefix), len(prefix) + last_length + _U32.size
        add(prefix)
        add(body)
        add(u32(extend(state, body)))
        end += size
        add_end(end)
    index = struct.pack(f"<{len(ends)}I", *ends)
    return b"".join((u32(google_crc32c.value(index)), index, *frames))


def _json(headers: dict[str, str]) -> bytes:
    """Headers as JSON: orjson's (UTF-8, a tenth of a microsecond), or the standard
    library's for what orjson refuses (a lone surrogate, a key that is not a string)."""
    try:
        return orjson.dumps(headers)
    except orjson.JSONEncodeError:
        return json.dumps(headers, separators=(",", ":")).encode()


def unpack_events(data: bytes, count: int, version: int) -> list[Stored]:
    """The ``count`` events of a blob of format ``version``, each whole or :class:`Damaged`
    (see the module doc)."""
    if version == CHECKSUMMED:
        return _unpack_checksummed(data, count)
    if version == LEGACY:
        return _unpack_legacy(data, count)
    return [Damaged(f"unknown format {version}", data if i == 0 else b"") for i in range(count)]


def _frame(data: bytes, start: int, end: int) -> Stored:
    """The frame ``data[start:end]``, checked."""
    if end - start < _FRAME_OVERHEAD or end > len(data):
        return Damaged("frame lengths do not fit", data[start:end])
    header_length, body_length = _LENGTHS.unpack_from(data, start)
    if _FRAME_OVERHEAD + header_length + body_length != end - start:
        return Damaged("frame lengths do not fit", data[start:end])
    if google_crc32c.value(data[start:end]) != _RESIDUE:
        return Damaged("checksum mismatch", data[start:end])
    body_start = start + 8 + header_length
    return data[start + 8 : body_start], data[body_start : end - 4]


def _unpack_checksummed(data: bytes, count: int) -> list[Stored]:
    first = 4 + 4 * count
    if len(data) < first:
        return [Damaged("batch shorter than its index", data if i == 0 else b"") for i in range(count)]
    (index_checksum,) = _U32.unpack_from(data, 0)
    ends: tuple[int, ...] = struct.unpack_from(f"<{count}I", data, 4)
    size = len(data)
    if google_crc32c.value(data[4:first]) != index_checksum or (ends and ends[-1] != size - first):
        return _walk(data, first, count)
    out: list[Stored] = []
    add, lengths, value = out.append, _LENGTHS.unpack_from, google_crc32c.value
    start = first
    for end in ends:
        end += first
        # the sound frame, inline (most are); any other is _frame's to name
        if end - start >= _FRAME_OVERHEAD and end <= size:
            header_length, body_length = lengths(data, start)
            fits = _FRAME_OVERHEAD + header_length + body_length == end - start
            if fits and value(data[start:end]) == _RESIDUE:
                body_start = start + 8 + header_length
                add((data[start + 8 : body_start], data[body_start : end - 4]))
                start = end
                continue
        add(_frame(data, start, end))
        start = end
    return out


def _walk(data: bytes, start: int, count: int) -> list[Stored]:
    """Frames found by their own lengths (the index is damaged)."""
    out: list[Stored] = []
    for _ in range(count):
        end = len(data) + 1
        if start + _LENGTHS.size <= len(data):
            header_length, body_length = _LENGTHS.unpack_from(data, start)
            end = start + _FRAME_OVERHEAD + header_length + body_length
        stored = _frame(data, start, end) if end <= len(data) else Damaged("unlocatable", b"")
        if isinstance(stored, Damaged):
            rest = count - len(out)
            out.append(Damaged("unlocatable", data[start:]))
            out.extend(Damaged("unlocatable", b"") for _ in range(rest - 1))
            return out
        out.append(stored)
        start = end
    return out


def _unpack_legacy(data: bytes, count: int) -> list[Stored]:
    if not count:
        return []  # nothing to set aside: trailing bytes of no event are no Damaged event
    out: list[Stored] = []
    offset = 0
    for _ in range(count):
        if offset + _LENGTHS.size > len(data):
            break
        header_length, body_length = _LENGTHS.unpack_from(data, offset)
        body_start = offset + _LENGTHS.size + header_length
        end = body_start + body_length
        if end > len(data):
            break
        out.append((data[offset + _LENGTHS.size : body_start], data[body_start:end]))
        offset = end
    if len(out) == count and offset == len(data):
        return out
    if len(out) == count:  # every frame parsed, yet the lengths disagree with the blob: trust none
        out, offset = [], 0
    reason = f"frames end at {offset}, the blob has {len(data)} bytes"
    return [
        *out,
        Damaged(reason, data[offset:]),
        *(Damaged(reason, b"") for _ in range(count - len(out) - 1)),
    ]
