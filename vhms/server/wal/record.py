"""The write-ahead log's record: a header (magic, payload length, CRC32C of both) and a
batch's payload (the series it names, then samples by segment-local id, as columns), its
encoding and decoding, and where a sound record starts in a segment's bytes. The boxes,
limits and every rejection reason: docs/vhms.md, "Write-ahead log"."""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import google_crc32c
import numpy as np

from vhms.exceptions import WalError

__all__ = [
    "HEADER_BYTES",
    "KIND_BATCH",
    "MAGIC",
    "MAX_RECORD",
    "Batch",
    "MalformedRecordError",
    "decode_batch",
    "encode_batch",
    "next_record",
    "record_at",
]

MAGIC = b"VWAL"
KIND_BATCH = 1
MAX_RECORD = 1 << 30  # payload bytes; the service's frames (256 MiB) make records well below it

_HEADER = struct.Struct("<4sII")  # magic, payload length, CRC32C of (length, payload)
_LENGTH = struct.Struct("<I")
HEADER_BYTES = _HEADER.size
_BATCH = struct.Struct("<BxxxIII")  # kind, named series, numeric samples, string samples


class MalformedRecordError(WalError, ValueError):
    """A record whose checksum holds but whose content does not decode (says why)."""


@dataclass
class Batch:
    """One ingest batch as a record holds it: the series it names (segment-local ids, the
    store's ids when written, and their keys), then samples by those ids."""

    named_ids: np.ndarray
    named_keys: list[str]
    ids: np.ndarray
    values: np.ndarray
    timestamps: np.ndarray
    string_ids: np.ndarray
    strings: list[str]
    string_timestamps: np.ndarray


def _pack(texts: Sequence[str]) -> tuple[bytes, bytes]:
    """UTF-8 of ``texts`` end to end, and the end offset of each (uint32 LE)."""
    blob = "".join(texts).encode("utf-8", "surrogatepass")
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    if len(blob) != int(lengths.sum()):  # not all ASCII: lengths in bytes, one by one
        lengths = np.fromiter(
            (len(text.encode("utf-8", "surrogatepass")) for text in texts), dtype=np.int64, count=len(texts)
        )
    return blob, np.cumsum(lengths).astype("<u4").tobytes()


def _unpack(blob: bytes, ends: np.ndarray, what: str) -> list[str]:
    if len(ends) and (int(ends[-1]) != len(blob) or (np.diff(ends.astype(np.int64)) < 0).any()):
        raise MalformedRecordError(f"the offsets of its {what} do not fit their {len(blob)} bytes")
    try:
        text = blob.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise MalformedRecordError(f"its {what} are not UTF-8: {exc}") from None
    bounds = [0, *ends.tolist()]
    if len(text) == len(blob):  # ASCII: character offsets are byte offsets
        return [text[bounds[i] : bounds[i + 1]] for i in range(len(ends))]
    try:
        return [blob[bounds[i] : bounds[i + 1]].decode("utf-8", "surrogatepass") for i in range(len(ends))]
    except UnicodeDecodeError as exc:
        raise MalformedRecordError(f"an offset of its {what} splits a character: {exc}") from None


def encode_batch(
    named_ids: np.ndarray,
    named_keys: Sequence[str],
    ids: np.ndarray,
    values: np.ndarray,
    timestamps: np.ndarray,
    string_ids: np.ndarray,
    strings: Sequence[str],
    string_timestamps: np.ndarray,
) -> bytes:
    """One record (header and payload) of a batch; ``WalError`` past :data:`MAX_RECORD`."""
    key_blob, key_ends = _pack(named_keys)
    string_blob, string_ends = _pack(strings)
    parts = [
        _BATCH.pack(KIND_BATCH, len(named_ids), len(ids), len(string_ids)),
        np.asarray(named_ids).astype("<u4").tobytes(),
        np.asarray(ids).astype("<u4").tobytes(),
        np.asarray(string_ids).astype("<u4").tobytes(),
        np.asarray(values, dtype="<f8").tobytes(),
        np.asarray(timestamps, dtype="<i8").tobytes(),
        np.asarray(string_timestamps, dtype="<i8").tobytes(),
        key_ends,
        string_ends,
        key_blob,
        string_blob,
    ]
    length = sum(len(part) for part in parts)
    if length > MAX_RECORD:
        raise WalError(
            f"a batch of {length} bytes exceeds the write-ahead log's record limit of {MAX_RECORD}"
        )
    crc = google_crc32c.value(_LENGTH.pack(length))
    for part in parts:
        crc = google_crc32c.extend(crc, part)
    return b"".join([_HEADER.pack(MAGIC, length, crc), *parts])


def decode_batch(payload: bytes) -> Batch:
    """The batch a record's payload holds; ``MalformedRecordError`` saying why it is not one."""
    if len(payload) < _BATCH.size:
        raise MalformedRecordError(f"a payload of {len(payload)} bytes is shorter than a batch header")
    kind, named, count, string_count = _BATCH.unpack_from(payload)
    if kind != KIND_BATCH:
        raise MalformedRecordError(f"record kind {kind} is unknown (this VHMS reads kind {KIND_BATCH})")
    fixed = _BATCH.size + 8 * named + 20 * count + 16 * string_count
    if fixed > len(payload):
        raise MalformedRecordError(
            f"counts ({named} series, {count} samples, {string_count} strings) need {fixed} bytes, "
            f"the payload has {len(payload)}"
        )
    offset = _BATCH.size

    def column(dtype: str, size: int, items: int) -> np.ndarray:
        nonlocal offset
        array = np.frombuffer(payload, dtype=dtype, count=items, offset=offset)
        offset += size * items
        return array

    named_ids = column("<u4", 4, named)
    ids = column("<u4", 4, count)
    string_ids = column("<u4", 4, string_count)
    values = column("<f8", 8, count)
    timestamps = column("<i8", 8, count)
    string_timestamps = column("<i8", 8, string_count)
    key_ends = column("<u4", 4, named)
    string_ends = column("<u4", 4, string_count)
    key_bytes = int(key_ends[-1]) if named else 0
    string_bytes = int(string_ends[-1]) if string_count else 0
    if offset + key_bytes + string_bytes != len(payload):
        raise MalformedRecordError(
            f"{offset} bytes of columns and {key_bytes + string_bytes} of text do not make its "
            f"{len(payload)} bytes"
        )
    keys = _unpack(payload[offset : offset + key_bytes], key_ends, "keys")
    texts = _unpack(payload[offset + key_bytes :], string_ends, "strings")
    return Batch(named_ids, keys, ids, values, timestamps, string_ids, texts, string_timestamps)


def record_at(data: mmap.mmap, position: int, size: int) -> bytes | None:
    """The payload of the sound record at ``position``, else ``None``."""
    if size - position < _HEADER.size:
        return None
    magic, length, crc = _HEADER.unpack_from(data, position)
    start = position + _HEADER.size
    if magic != MAGIC or length > MAX_RECORD or start + length > size:
        return None
    payload = data[start : start + length]
    if google_crc32c.extend(google_crc32c.value(_LENGTH.pack(length)), payload) != crc:
        return None
    return payload


def next_record(data: mmap.mmap, position: int, size: int) -> int | None:
    """Where the first sound record after ``position`` starts, else ``None``."""
    candidate = data.find(MAGIC, position)
    while candidate >= 0:
        if record_at(data, candidate, size) is not None:
            return candidate
        candidate = data.find(MAGIC, candidate + 1)
    return None
