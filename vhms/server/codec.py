"""The compressed column form of a closed block of a coarse ring: ``[K buckets, n series]`` of
stored bits (:func:`vhms.server.rings.encode_values`: 0 is an empty bucket) in a few bytes a
bucket, encoded and decoded for many series at once by numpy (no loop per series).

Per series, the block is one of (its 3-byte header says which, and the byte widths):

- **empty**: no bucket written; nothing stored.
- **decimal**: every value is an integer ``m`` divided by ``10**scale`` (``scale`` 0 to 12, the
  smallest that fits; checked bit for bit: ``m / 10**scale`` gives the very float64 back, so
  ``-0.0``, infinities and NaNs are never decimal), ``|m| <= 2**53``. Stored: the first ``m``
  (zigzag), the smallest of the block's deltas (zigzag), then each delta less that smallest
  one, each field in the fewest whole bytes its largest value needs (a flat series: 0 bytes a
  bucket; a counter: its increments' spread). Victoria Metrics' decimal conversion with a
  frame of reference, byte-aligned.
- **raw**: any other float64: the first value's 8 bytes, then each value XOR the previous one
  (Gorilla's XOR) in the bytes where the block's XORs differ from zero (its common leading
  and trailing zero bytes left out).

A series with empty buckets among written ones also keeps a bit per bucket (``ceil(K / 8)``
bytes); its empty buckets repeat the previous value for the deltas, so they cost no width.
The bytes of every series follow each other in one ``uint8`` array; a series' offset is the
running sum of the sizes its header gives (not stored).
"""

from __future__ import annotations

import itertools
import mmap
from dataclasses import dataclass

import numpy as np

__all__ = ["Block", "encode_block"]

_EMPTY_BITS = np.float64(np.nan).view(np.uint64)
_MAX_SCALE = 12
_MAX_EXACT = float(1 << 53)
_EMPTY, _DECIMAL, _RAW = 0, 1, 2
_POWERS = 10.0 ** np.arange(_MAX_SCALE + 1)


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
    """``K`` buckets of ``n`` series, compressed (see the module doc)."""

    buckets: int
    header: (
        np.ndarray
    )  # [n, 3] uint8: kind | gappy << 2 | scale << 3; first | least << 4; trailing | width << 4
    data: np.ndarray  # uint8, every series' bytes one after the other

    @property
    def series(self) -> int:
        return len(self.header)

    @property
    def nbytes(self) -> int:
        return int(self.header.nbytes + self.data.nbytes)

    def decode(self, local: np.ndarray) -> np.ndarray:
        """The stored bits ``[K, len(local)]`` of the series at ``local`` (column numbers of the
        block; those at or past :attr:`series` read as empty). The series are taken a layout
        at a time (the same field widths: their bytes one gather, placed into their 8-byte
        fields by slices), sorted by kind so that each kind is decoded over a run of rows."""
        k = self.buckets
        local = np.asarray(local, dtype=np.int64)
        out = np.zeros((k, len(local)), dtype=np.uint64)
        inside = np.flatnonzero(local < self.series)
        if not len(inside):
            return out
        picked = local[inside]
        header = self.header[picked]
        kind = (header[:, 0] & 3).astype(np.int32)
        layout = (
            (kind << 17) | ((header[:, 0] & 4).astype(np.int32) << 14) | (header[:, 1].astype(np.int32) << 8)
        )
        layout |= header[:, 2]
        order = np.argsort(layout, kind="stable")
        layout = layout[order]
        sizes = _sizes(self.header, k)
        fields, masks = _assemble(self.data, (np.cumsum(sizes) - sizes)[picked[order]], layout, k)
        values = _values(fields, masks, layout, header[order, 0] >> 3)
        unsorted = values.take(np.argsort(order), axis=0)
        if len(inside) == len(local):
            out[...] = unsorted.T
        else:
            out[:, inside] = unsorted.T
        return out


def _keep(header: np.ndarray, k: int) -> np.ndarray:
    """Which bytes of each series' fields (``K + 1`` of 8 bytes: first, least, deltas) and
    mask are stored, from its header: ``[series, 8 * (K + 1) + mask bytes]``."""
    first = (header[:, 1] & 15).astype(np.int16)
    least = (header[:, 1] >> 4).astype(np.int16)
    trailing = (header[:, 2] & 15).astype(np.int16)
    width = (header[:, 2] >> 4).astype(np.int16)
    byte = np.arange(8, dtype=np.int16)
    fields = np.empty((len(header), k + 1, 8), dtype=bool)
    fields[:, 0] = byte < first[:, None]
    fields[:, 1] = byte < least[:, None]
    fields[:, 2:] = ((byte >= trailing[:, None]) & (byte < (trailing + width)[:, None]))[:, None, :]
    gappy = (header[:, 0] & 4) != 0
    mask = np.broadcast_to(gappy[:, None], (len(header), (k + 7) // 8))
    return np.concatenate([fields.reshape(len(header), -1), mask], axis=1)


def _sizes(header: np.ndarray, k: int) -> np.ndarray:
    """Each series' bytes in a block, from its header."""
    h = header.astype(np.int32)
    sizes: np.ndarray = (
        (h[:, 1] & 15) + (h[:, 1] >> 4) + (k - 1) * (h[:, 2] >> 4) + ((h[:, 0] >> 2) & 1) * ((k + 7) // 8)
    )
    return sizes


def _assemble(
    data: np.ndarray, offsets: np.ndarray, layout: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The fields ``[n, K + 1]`` (first, least, deltas as 8-byte words) and gap bits ``[n,
    mask bytes]`` of series sorted by ``layout`` (kind << 17 | gappy << 16 | header bytes 1
    and 2), their bytes at ``offsets`` of ``data``: one gather and a few slices per layout."""
    n = len(layout)
    fields = np.zeros((n, k + 1), dtype=np.uint64)
    as_bytes = fields.view(np.uint8).reshape(n, k + 1, 8)
    mask_bytes = (k + 7) // 8
    masks = np.zeros((n, mask_bytes), dtype=np.uint8)
    starts = [0, *(np.flatnonzero(np.diff(layout)) + 1).tolist(), n]
    for low, high in itertools.pairwise(starts):
        code = int(layout[low])
        first, least, trailing, width = code >> 8 & 15, code >> 12 & 15, code & 15, code >> 4 & 15
        gappy = code >> 16 & 1
        end = first + least + (k - 1) * width
        size = end + gappy * mask_bytes
        if not size:
            continue
        windows = np.ndarray((len(data) - size + 1, size), np.uint8, data, strides=(1, 1))  # a view
        part = windows[offsets[low:high]]  # a row of bytes a series
        as_bytes[low:high, 0, :first] = part[:, :first]
        as_bytes[low:high, 1, :least] = part[:, first : first + least]
        if width:
            deltas = part[:, first + least : end].reshape(high - low, k - 1, width)
            as_bytes[low:high, 2:, trailing : trailing + width] = deltas
        if gappy:
            masks[low:high] = part[:, end:]
    return fields, masks


def _values(fields: np.ndarray, masks: np.ndarray, layout: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The stored bits ``[n, K]`` of series sorted by ``layout`` (so each kind is a run of
    rows) from their fields, gap bits and decimal scales."""
    n, k = fields.shape[0], fields.shape[1] - 1
    values = np.zeros((n, k), dtype=np.uint64)
    decimal_from, raw_from, raw_to = np.searchsorted(layout >> 17, [_DECIMAL, _RAW, _RAW + 1]).tolist()
    if raw_from > decimal_from:
        part = fields[decimal_from:raw_from]
        m = np.empty((raw_from - decimal_from, k), dtype=np.int64)
        m[:, 0] = _unzigzag(part[:, 0])
        m[:, 1:] = part[:, 2:].view(np.int64) + _unzigzag(part[:, 1])[:, None]
        np.cumsum(m, axis=1, out=m)
        decimal = values[decimal_from:raw_from]
        np.divide(m, _POWERS[scale[decimal_from:raw_from]][:, None], out=decimal.view(np.float64))
        decimal ^= _EMPTY_BITS
    if raw_to > raw_from:
        raw = values[raw_from:raw_to]
        raw[:, 0] = fields[raw_from:raw_to, 0]
        raw[:, 1:] = fields[raw_from:raw_to, 2:]
        np.bitwise_xor.accumulate(raw, axis=1, out=raw)
    gappy = np.flatnonzero((layout >> 16) & 1)
    if len(gappy):
        values[gappy] *= np.unpackbits(masks[gappy], axis=1, count=k, bitorder="little").astype(np.uint64)
    return values


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
    kind = np.where(decimal, _DECIMAL, np.where(raw, _RAW, _EMPTY)).astype(np.uint8)
    header = np.empty((n, 3), dtype=np.uint8)
    header[:, 0] = kind | (gappy.astype(np.uint8) << 2) | (np.maximum(scale, 0).astype(np.uint8) << 3)
    header[:, 1] = first | (least << 4)
    header[:, 2] = trailing | (width << 4)
    mask = np.packbits(present, axis=1, bitorder="little")
    matrix = np.concatenate([fields.view(np.uint8).reshape(n, -1), mask], axis=1)
    return Block(k, _mapped(header), _mapped(matrix[_keep(header, k)]))
