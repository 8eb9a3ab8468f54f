"""A read of the finest ring's samples: the values and the sample times of a run of buckets
together, in one pass.

A fetch with sample times (:meth:`vhms.server.store.Store.reading`) reads both of each
cell. Where a bucket's cells lie is the same for both (the plain rows, an open block whose
rows are plain or decoded, a sealed block through the cache of decoded blocks), so it is
found once, and the rows of one array that follow each other (an open block's rows in the
plain part and the plain rows after them) are copied as one: a small query's read of 12
series over 15 minutes is a few copies of each, where a fill of the values and then one of
the times each found the same blocks anew (what was most of a small query's read). The
answers are :meth:`vhms.server.sealed.SealedRing.fill`'s, bit for bit
(``tests/vhms/test_sample_reads.py``).
"""

from __future__ import annotations

import numpy as np

from vhms.server.open_blocks import offsets_of
from vhms.server.rings import EMPTY_BITS, held_rows
from vhms.server.sealed import SealedRing, column_runs

__all__ = ["fill_samples"]


# ``height`` rows of the answer from ``row`` on: ``values``' and ``times``' rows from ``slot``
# on (every column of a chunk: picked by the copy), or with ``slot`` None the rows themselves,
# their columns picked already (a sealed block's stored bits and stored sample times: None
# where empty)
_Rows = tuple[int, int, np.ndarray | None, np.ndarray | None, int | None]  # row, height, values, times, slot


def fill_samples(
    ring: SealedRing, ids: np.ndarray, span: tuple[int, int], out: tuple[np.ndarray, np.ndarray]
) -> None:
    """Into time-major ``out``'s arrays ``[buckets, ids]`` (values: anything; sample times:
    zeros) the float64 bits of the values and the sample times of sorted ``ids`` (not empty)
    for the consecutive buckets ``span`` (the first and how many), as :meth:`SealedRing.fill`
    writes them with ``decoded`` and with ``times``."""
    values, offsets = out
    first, count = span
    low, high = held_rows(ring.head, ring.slots, first, count)
    plain = ring.first_plain_row(first, low, high)
    if low:
        values[:low] = 0
    if high < count:
        values[high:] = 0
    runs = column_runs(ids)
    blocks = (first + plain - 1) // ring.block - (first + low) // ring.block + 1
    cached = low >= plain or ring.reads_through_cache(runs, blocks)
    for start, stop, chunk, local, columns in runs:
        rows = _sealed_rows(ring, chunk, (first + low, first + plain - 1), (low, local, cached))
        rows += _plain_rows(ring, chunk, first + plain, (plain, high))
        for row, height, source_values, source_times, slot in _joined(rows):
            cells = slice(row, row + height), slice(start, stop)
            if slot is None:
                values[cells] = 0 if source_values is None else source_values
                if source_times is not None:
                    offsets[cells] = offsets_of(source_times, ring.time_dtype)
                continue
            for source, target in ((source_values, values), (source_times, offsets)):
                if source is None:
                    continue
                picked = source[slot : slot + height]
                if isinstance(columns, slice):
                    target[cells] = picked[:, columns]
                else:  # gathered straight into the answer (the ids are in range: clip checks none)
                    picked.take(local, axis=1, out=target[cells], mode="clip")
    np.bitwise_xor(values, EMPTY_BITS, out=values)


def _sealed_rows(
    ring: SealedRing, chunk: int, span: tuple[int, int], how: tuple[int, np.ndarray, bool]
) -> list[_Rows]:
    """The rows of the sealed buckets ``span`` (first and last; none where first > last) of
    ``chunk``, the first at row ``row`` (``how``: that row, the chunk's local ids, whether
    through the cache of decoded blocks)."""
    row, local, cached = how
    first, last = span
    block = ring.block
    found: list[_Rows] = []
    for number in range(first // block, last // block + 1) if first <= last else ():
        low, high = max(first - number * block, 0), min(last - number * block, block - 1) + 1
        at = row + number * block + low - first
        if (number, chunk) in ring.open:
            entry = ring.open.open[(number, chunk)]
            if entry is None:  # its rows are in the plain part
                slot = number * block % ring.plain.slots + low
                found.append((at, high - low, ring.plain.values[chunk], _times(ring, chunk), slot))
            else:
                found.append((at, high - low, entry.bits, entry.times, low))
            continue
        picked: list[np.ndarray | None] = []
        for times, key in ((False, ring.step_ms), (True, -ring.step_ms)):
            stored = ring.stored(number, chunk, times)
            if stored is None:
                picked.append(None)
            else:
                assert not isinstance(stored, np.ndarray)  # not open: a sealed block
                decoded = (
                    ring.cache.read((key, number, chunk), stored, local) if cached else stored.decode(local)
                )
                picked.append(decoded[low:high])
        found.append((at, high - low, picked[0], picked[1], None))
    return found


def _plain_rows(ring: SealedRing, chunk: int, first: int, rows: tuple[int, int]) -> list[_Rows]:
    """The answer's rows ``[low, high)`` of ``chunk`` in the plain part, the first of them
    bucket ``first``: up to two runs of its slots (it wraps), the rows it does not hold
    empty."""
    low, high = rows
    plain = ring.plain
    held, end = held_rows(plain.head, plain.slots, first, high - low)
    slot = (first + held) % plain.slots
    wrap = min(end - held, plain.slots - slot)
    values, times = plain.values[chunk], _times(ring, chunk)
    return [
        (low, held, None, None, None),
        (low + held, wrap, values, times, slot),
        (low + held + wrap, end - held - wrap, values, times, 0),
        (low + end, high - low - end, None, None, None),
    ]


def _times(ring: SealedRing, chunk: int) -> np.ndarray | None:
    return None if ring.plain.times is None else ring.plain.times[chunk]


def _joined(rows: list[_Rows]) -> list[_Rows]:
    """``rows`` without empty runs, those of the same arrays that follow each other joined."""
    joined: list[_Rows] = []
    for part in rows:
        row, height, values, _, slot = part
        if not height:
            continue
        if joined:
            last_row, last_height, last_values, last_times, last_slot = joined[-1]
            if (
                slot is not None
                and last_slot is not None
                and last_values is values
                and last_row + last_height == row
                and last_slot + last_height == slot
            ):
                joined[-1] = (last_row, last_height + height, last_values, last_times, last_slot)
                continue
        joined.append(part)
    return joined
