"""The compressed column form of a closed block of a coarse ring: ``[K buckets, n series]`` of
stored bits (:func:`vhms.server.rings.encode_values`: 0 is an empty bucket) in a few bytes a
bucket, encoded and decoded for many series at once by numpy (no loop per series).

Per series, the block is one of:

- **empty**: no bucket written; nothing stored (not even its column).
- **decimal**: every value is an integer ``m`` divided by ``10**scale`` (``scale`` 0 to 12, the
  smallest that fits; checked bit for bit: ``m / 10**scale`` gives the very float64 back, so
  ``-0.0``, infinities and NaNs are never decimal), ``|m| <= 2**51``. Stored: the first ``m``
  (zigzag), the smallest of the block's deltas (zigzag), each in the fewest whole bytes it
  needs, then each delta less that smallest one in 0, 1, 2, 4 or 8 bytes (the fewest whole
  bytes the largest needs, 3 taken as 4 and 5 to 7 as 8: numpy reads them as its own
  integers; a flat series: 0 bytes a bucket; a counter: its increments' spread). Victoria
  Metrics' decimal conversion with a frame of reference, byte-aligned.
- **raw**: any other float64: the first value's 8 bytes, then each value XOR the previous one
  (Gorilla's XOR) in 1, 2, 4 or 8 bytes from the lowest byte where the block's XORs differ
  from zero (its common trailing zero bytes left out).

A series with empty buckets among written ones also keeps a bit per bucket (``ceil(K / 8)``
bytes); its empty buckets repeat the previous value for the deltas, so they cost no width.

The written series are kept **in groups of one layout** (kind, gappy or not, scale, the
byte widths of each field, trailing zero bytes), sorted by it when the block is sealed:
a group's deltas are one time-major ``[K - 1, count]`` array of its width, so a decode
takes a group's deltas as one numpy view of its bytes and does each step of its arithmetic
over the whole group at once (no sort, no per-series offsets at read time). ``columns``
(2 bytes a written series) says which column each stored series is.
"""

from __future__ import annotations

import itertools
import mmap
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Block", "encode_block", "join_blocks"]

_EMPTY_BITS = np.float64(np.nan).view(np.uint64)
_MAX_SCALE = 12
_MAX_EXACT = float(1 << 51)  # a block's sums in float64 stay exact (see _group_rows)
_EMPTY, _DECIMAL, _RAW = 0, 1, 2
_POWERS = 10.0 ** np.arange(_MAX_SCALE + 1)
_NUMPY_WIDTH = np.array([0, 1, 2, 4, 4, 8, 8, 8, 8], dtype=np.uint8)
_ROW_AT_A_TIME = 64  # columns from which an accumulation goes a row at a time
_DTYPES: dict[int, type[np.unsignedinteger[Any]]] = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _widths(unsigned: np.ndarray) -> np.ndarray:
    """The fewest whole bytes that hold each value (0 for 0)."""
    width = np.zeros(unsigned.shape, dtype=np.uint8)
    for byte in range(8):
        width += (unsigned >> np.uint64(8 * byte)) != 0
    return width


def _zigzag(signed: np.ndarray) -> np.ndarray:
    return ((signed << 1) ^ (signed >> 63)).view(np.uint64)


def _unzigzag(unsigned: np.ndarray) -> np.ndarray:
    return ((unsigned >> np.uint64(1)).view(np.int64)) ^ -(unsigned & np.uint64(1)).view(np.int64)


@dataclass(frozen=True)
class Block:
    """``K`` buckets of ``series`` columns, compressed (see the module doc)."""

    buckets: int
    series: int  # the chunk's columns when the block was sealed
    columns: np.ndarray  # uint16, the column of each stored series, by group then column
    groups: np.ndarray  # int64 [G, 3]: layout code, first stored series, byte offset of its bytes
    data: np.ndarray  # uint8, every group's bytes one after the other, each 8-byte aligned

    @property
    def nbytes(self) -> int:
        return int(self.columns.nbytes + self.groups.nbytes + self.data.nbytes)

    def decode(self, local: np.ndarray) -> np.ndarray:
        """The stored bits ``[K, len(local)]`` of the columns ``local`` (those at or past
        :attr:`series`, or never written, read as empty): each group's series decoded into
        a run of columns of one array (its deltas one view of its bytes, its arithmetic over
        the whole group, time-major), then one gather puts the columns in ``local``'s order."""
        k = self.buckets
        local = np.asarray(local, dtype=np.int64)
        stored = len(self.columns)
        if not stored or not len(local):
            return np.zeros((k, len(local)), dtype=np.uint64)
        position = np.full(self.series + 1, stored, dtype=np.int64)  # past series: none stored
        position[self.columns] = np.arange(stored)
        wanted = position[np.minimum(local, self.series)]
        stops = [*self.groups[1:, 1].tolist(), stored]
        asked = np.zeros(stored + 1, dtype=bool)
        asked[wanted] = True
        if asked[:stored].all():  # every stored series: each group decoded whole
            decoded = np.empty((k, stored + 1), dtype=np.uint64)
            decoded[:, stored] = 0  # the last column: empty
            parts: list[_Part] = [
                (code, offset, stop - start, start, stop, None)
                for (code, start, offset), stop in zip(self.groups.tolist(), stops, strict=True)
            ]
            _decode_groups(self.data, parts, decoded)
            whole: np.ndarray = decoded.take(wanted, axis=1)
            return whole
        held = np.flatnonzero(asked[:stored])
        before = np.zeros(stored + 1, dtype=np.int64)  # stored series asked before each (all: stored)
        np.cumsum(asked[:stored], out=before[1:])
        decoded = np.empty((k, len(held) + 1), dtype=np.uint64)
        decoded[:, len(held)] = 0  # the last column: empty
        bounds = before[[*self.groups[:, 1].tolist(), stored]].tolist()
        some: list[_Part] = [
            (code, offset, stop - start, bounds[g], bounds[g + 1], held[bounds[g] : bounds[g + 1]] - start)
            for g, ((code, start, offset), stop) in enumerate(zip(self.groups.tolist(), stops, strict=True))
            if bounds[g] < bounds[g + 1]
        ]
        _decode_groups(self.data, some, decoded)
        picked: np.ndarray = decoded.take(before[wanted], axis=1)
        return picked


def _fields(code: int) -> tuple[int, int, int, int, int, int, int]:
    """kind, gappy, scale, first's bytes, least's bytes, trailing zero bytes, delta width."""
    return (
        code & 3,
        code >> 2 & 1,
        code >> 3 & 15,
        code >> 7 & 15,
        code >> 11 & 15,
        code >> 15 & 15,
        code >> 19 & 15,
    )


def _group_size(code: int, count: int, k: int) -> int:
    """A group's bytes: deltas ``[K - 1, count]`` at ``width`` bytes, then each series' first
    and least fields and gap bits, padded to 8 bytes."""
    _, gappy, _, first, least, _, width = _fields(code)
    size = count * ((k - 1) * width + first + least + gappy * ((k + 7) // 8))
    return -(-size // 8) * 8


def _words(part: np.ndarray, rows: np.ndarray | None, width: int) -> np.ndarray:
    """Little-endian words of ``width`` bytes (``[count, width]`` bytes) as uint64."""
    picked = part if rows is None else part[rows]
    words = np.zeros((len(picked), 8), dtype=np.uint8)
    words[:, :width] = picked
    return words.view(np.uint64).reshape(-1)


# a group to decode: its layout code, byte offset and count of series, the columns
# ``[low, high)`` of the answer it fills, and its series to decode (None: all)
_Part = tuple[int, int, int, int, int, np.ndarray | None]


def _decode_groups(data: np.ndarray, parts: list[_Part], decoded: np.ndarray) -> None:
    """The stored bits of ``parts`` into their columns of ``decoded`` ``[K, columns]``: each
    group's first values and deltas written, then the running sums (or XORs) taken over
    runs of neighbouring columns of one kind at once (a numpy call per bucket for the run,
    not one per bucket and group: a block holds a group a layout and a slice of 2,048
    series), then each group's scale, the stored bits of the decimal runs and each gappy
    group's empty buckets."""
    runs: list[list[int]] = []  # kind, low, high
    for code, offset, count, low, high, rows in parts:
        _group_rows(data, code, offset, count, rows, decoded[:, low:high])
        kind = code & 3
        if runs and runs[-1][0] == kind and runs[-1][2] == low:
            runs[-1][2] = high
        else:
            runs.append([kind, low, high])
    for kind, low, high in runs:
        if kind == _DECIMAL:
            _accumulate(np.add, decoded[:, low:high].view(np.float64))
        else:
            _accumulate(np.bitwise_xor, decoded[:, low:high])
    for code, _, _, low, high, _ in parts:
        scale = code >> 3 & 15
        if code & 3 == _DECIMAL and scale:
            floats = decoded[:, low:high].view(np.float64)
            np.divide(floats, _POWERS[scale], out=floats)
    for kind, low, high in runs:
        if kind == _DECIMAL:
            decoded[:, low:high] ^= _EMPTY_BITS
    k = len(decoded)
    for code, offset, count, low, high, rows in parts:
        _, gappy, _, first_width, least_width, _, width = _fields(code)
        if gappy:
            mask_bytes = (k + 7) // 8
            at = offset + count * ((k - 1) * width + first_width + least_width)
            masks = data[at : at + count * mask_bytes].reshape(count, mask_bytes)
            bits = np.unpackbits(masks if rows is None else masks[rows], axis=1, count=k, bitorder="little")
            decoded[:, low:high] *= bits.T


def _group_rows(
    data: np.ndarray, code: int, offset: int, count: int, rows: np.ndarray | None, values: np.ndarray
) -> None:
    """A group's series (``rows``, None: all ``count``) as they are before their running
    sums (XORs) into ``values`` ``[K, len(rows)]``: decimal, the first ``m`` and each delta
    (the smallest added back) as float64; raw, the first bits and each XOR."""
    kind, _, _, first_width, least_width, trailing, width = _fields(code)
    k = len(values)
    at = offset
    deltas = data[at : at + (k - 1) * count * width].view(_DTYPES.get(width, np.uint8))
    deltas = deltas.reshape(k - 1, count if width else 0)
    deltas = deltas if rows is None or not width else deltas[:, rows]
    at += (k - 1) * count * width
    first = _words(data[at : at + count * first_width].reshape(count, first_width), rows, first_width)
    at += count * first_width
    if kind == _DECIMAL:
        least = _words(data[at : at + count * least_width].reshape(count, least_width), rows, least_width)
        # in float64 from the start: every partial sum is an m of the block, |m| <= 2**51, and
        # each delta is exact too, so each step is exact; the bits are the integer path's
        floats = values.view(np.float64)
        if width:
            np.add(deltas, _unzigzag(least).astype(np.float64), out=floats[1:])
        else:
            floats[1:] = _unzigzag(least).astype(np.float64)
        floats[0] = _unzigzag(first)
        return
    if width:
        values[1:] = deltas
        if trailing:
            values[1:] <<= np.uint64(8 * trailing)
    else:
        values[1:] = 0
    values[0] = first


def _accumulate(ufunc: np.ufunc, values: np.ndarray) -> None:
    """``ufunc.accumulate`` down the rows of ``values`` in place: a row at a time for a wide
    array (each a contiguous pass; numpy's accumulate along the first axis steps through
    memory a column at a time, 2-3 times slower), in one call for a narrow one."""
    if values.shape[1] < _ROW_AT_A_TIME:
        ufunc.accumulate(values, axis=0, out=values)
        return
    for row in range(1, len(values)):
        ufunc(values[row], values[row - 1], out=values[row])


def _mapped(array: np.ndarray) -> np.ndarray:
    """A copy of ``array`` in anonymous memory of its own: a block lives for days, and among
    the heap's short-lived temporaries it would keep their freed pages from going back."""
    if not array.nbytes:
        return array
    copy = np.frombuffer(mmap.mmap(-1, array.nbytes, flags=mmap.MAP_PRIVATE), dtype=array.dtype)
    copy = copy.reshape(array.shape)
    copy[...] = array
    return copy


def encode_block(stored: np.ndarray) -> Block:
    """Compress ``stored`` (``[K, n]`` stored bits, any layout) into a :class:`Block`."""
    k, n = stored.shape
    bits = np.ascontiguousarray(stored.T)  # [n, K]
    present = bits != 0
    written = present.any(axis=1)
    gappy = written & ~present.all(axis=1)
    # empty buckets repeat the previous value (the first written one before it) for the deltas
    position = np.where(present, np.arange(k), -1)
    np.maximum.accumulate(position, axis=1, out=position)
    position = np.where(position < 0, np.argmax(present, axis=1)[:, None], position)
    filled = np.take_along_axis(bits, position, axis=1)
    values = (filled ^ _EMPTY_BITS).view(np.float64)
    scale = np.full(n, -1, dtype=np.int16)
    m = np.zeros((n, k), dtype=np.int64)
    pending = np.flatnonzero(written)
    with np.errstate(all="ignore"):
        for power in range(_MAX_SCALE + 1):
            if not len(pending):
                break
            scaled = np.rint(values[pending] * _POWERS[power])
            fits = np.isfinite(scaled) & (np.abs(scaled) <= _MAX_EXACT)
            integers = np.where(fits, scaled, 0).astype(np.int64)
            back = (integers.astype(np.float64) / _POWERS[power]).view(np.uint64)
            exact = (fits & (back == values[pending].view(np.uint64))).all(axis=1)
            scale[pending[exact]] = power
            m[pending[exact]] = integers[exact]
            pending = pending[~exact]
    decimal = scale >= 0
    fields = np.zeros((n, k + 1), dtype=np.uint64)
    first = np.zeros(n, dtype=np.uint8)
    least = np.zeros(n, dtype=np.uint8)
    trailing = np.zeros(n, dtype=np.uint8)
    width = np.zeros(n, dtype=np.uint8)
    if decimal.any():
        dm = m[decimal]
        deltas = np.diff(dm, axis=1)
        smallest = deltas.min(axis=1) if k > 1 else np.zeros(len(dm), dtype=np.int64)
        fields[decimal, 0] = _zigzag(dm[:, 0])
        fields[decimal, 1] = _zigzag(smallest)
        fields[decimal, 2:] = (deltas - smallest[:, None]).view(np.uint64)
        first[decimal] = _widths(fields[decimal, 0])
        least[decimal] = _widths(fields[decimal, 1])
        width[decimal] = _widths(np.bitwise_or.reduce(fields[decimal, 2:], axis=1)) if k > 1 else 0
    raw = written & ~decimal
    if raw.any():
        rb = filled[raw]
        xors = rb[:, 1:] ^ rb[:, :-1]
        fields[raw, 0] = rb[:, 0]
        fields[raw, 2:] = xors
        first[raw] = 8
        union = np.bitwise_or.reduce(xors, axis=1) if k > 1 else np.zeros(len(rb), dtype=np.uint64)
        top = _widths(union)  # bytes up to the highest non-zero one
        low = np.zeros(len(rb), dtype=np.uint8)  # trailing zero bytes
        for byte in range(7):  # a union that is not zero has a byte that is not
            low += ((union & ((np.uint64(1) << np.uint64(8 * (byte + 1))) - np.uint64(1))) == 0) & (top > 0)
        trailing[raw] = low
        width[raw] = top - low
    kind = np.where(decimal, _DECIMAL, np.where(raw, _RAW, _EMPTY)).astype(np.int64)
    width = _NUMPY_WIDTH[width].astype(np.int64)  # 3 bytes in 4, 5 to 7 in 8: a view decodes them
    codes = (
        kind
        | gappy.astype(np.int64) << 2
        | np.maximum(scale, 0).astype(np.int64) << 3
        | first.astype(np.int64) << 7
        | least.astype(np.int64) << 11
        | np.minimum(trailing, 8 - width).astype(np.int64) << 15
        | width << 19
    )
    return _grouped(codes, written, fields, np.packbits(present, axis=1, bitorder="little"))


def _grouped(codes: np.ndarray, written: np.ndarray, fields: np.ndarray, mask: np.ndarray) -> Block:
    """The block of the written series' ``fields`` ``[n, K + 1]`` and gap bits, in groups of
    one layout ``codes``."""
    n, k = fields.shape[0], fields.shape[1] - 1
    kept = np.flatnonzero(written)
    kept = kept[np.argsort(codes[kept], kind="stable")]
    starts = [0, *(np.flatnonzero(np.diff(codes[kept])) + 1).tolist(), len(kept)]
    groups, parts, offset = [], [], 0
    for begin, end in itertools.pairwise(starts):
        if begin == end:
            continue
        code = int(codes[kept[begin]])
        parts.append(_group_bytes(code, fields[kept[begin:end]], mask[kept[begin:end]], k))
        groups.append((code, begin, offset))
        offset += len(parts[-1])
    data = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)
    table = np.array(groups, dtype=np.int64).reshape(-1, 3)
    return Block(k, n, _mapped(kept.astype(np.uint16)), table, _mapped(data))


def _group_bytes(code: int, fields: np.ndarray, mask: np.ndarray, k: int) -> np.ndarray:
    """A group's bytes (see :func:`_group_size`) from its series' fields ``[count, K + 1]``."""
    _, gappy, _, first, least, trailing, width = _fields(code)
    count = len(fields)
    as_bytes = fields.view(np.uint8).reshape(count, k + 1, 8)
    deltas = (fields[:, 2:] >> np.uint64(8 * trailing)).T.astype(_DTYPES[width]) if width else None
    parts = [
        np.zeros(0, dtype=np.uint8) if deltas is None else deltas.reshape(-1).view(np.uint8),
        as_bytes[:, 0, :first].reshape(-1),
        as_bytes[:, 1, :least].reshape(-1),
        mask.reshape(-1) if gappy else np.zeros(0, dtype=np.uint8),
    ]
    out = np.zeros(_group_size(code, count, k), dtype=np.uint8)
    joined = np.concatenate(parts)
    out[: len(joined)] = joined
    return out


def join_blocks(parts: list[tuple[int, Block]], series: int) -> Block:
    """One block of ``series`` columns from blocks of some of them (each with the first
    column it holds, in order): their groups side by side (a layout may then have several
    groups, each decoded on its own), so a block is encoded a slice of columns at a time."""
    columns = [part.columns.astype(np.int64) + first for first, part in parts]
    tables, stored, offset = [], 0, 0
    for _, part in parts:
        tables.append(part.groups + np.array([0, stored, offset], dtype=np.int64))
        stored, offset = stored + len(part.columns), offset + len(part.data)
    k = parts[0][1].buckets
    return Block(
        k,
        series,
        _mapped(np.concatenate(columns).astype(np.uint16)),
        np.concatenate(tables).reshape(-1, 3),
        _mapped(np.concatenate([part.data for _, part in parts])),
    )
