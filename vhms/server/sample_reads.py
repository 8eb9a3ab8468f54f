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

from typing import NamedTuple

import numpy as np

from vhms.server.decoded import WHOLE_FRACTION
from vhms.server.open_blocks import offsets_of
from vhms.server.rings import CHUNK, EMPTY_BITS, held_rows
from vhms.server.sealed import SealedRing, column_runs

__all__ = ["fill_samples"]


class _Rows(NamedTuple):
    """``height`` rows of the answer from ``row`` on: ``values``' and ``times``' rows from
    ``slot`` on (every column of a chunk: picked by the copy), or with ``slot`` None the
    rows themselves, their columns picked already (a sealed block's stored bits and
    stored sample times: None where empty)."""

    row: int
    height: int
    values: np.ndarray | None
    times: np.ndarray | None
    slot: int | None


def fill_samples(
    ring: SealedRing, ids: np.ndarray, buckets: np.ndarray, out: tuple[np.ndarray, np.ndarray]
) -> None:
    """Into time-major ``out``'s arrays ``[buckets, ids]`` (values: anything; sample times:
    zeros) the float64 bits of the values and the sample times of sorted ``ids`` (not empty)
    for consecutive ``buckets``, as :meth:`SealedRing.fill` writes them with ``decoded`` and
    with ``times``."""
    values, offsets = out
    first, low, high = held_rows(ring.head, ring.slots, buckets)
    plain = low if ring.sealed is None else min(max(ring.sealed * ring.block - first, low), high)
    values[:low] = 0
    values[high:] = 0
    runs = column_runs(ids)
    cached = True
    if low < plain:  # a read that would evict more than the cache holds reads around it
        width = sum(CHUNK if WHOLE_FRACTION * len(run[3]) >= CHUNK else len(run[3]) for run in runs)
        blocks = (first + plain - 1) // ring.block - (first + low) // ring.block + 1
        cached = blocks * width * ring.block * 8 <= ring.cache.budget
    for start, stop, chunk, local, columns in runs:
        rows = _sealed_rows(ring, chunk, (first + low, first + plain - 1), (low, local, cached))
        rows += _plain_rows(ring, chunk, buckets[plain:high], plain)
        for part in _joined(rows):
            cells = slice(part.row, part.row + part.height), slice(start, stop)
            if part.slot is None:
                values[cells] = 0 if part.values is None else part.values
                if part.times is not None:
                    offsets[cells] = offsets_of(part.times, ring.time_dtype)
                continue
            for source, target in ((part.values, values), (part.times, offsets)):
                if source is not None:
                    rows_of = source[part.slot : part.slot + part.height]
                    target[cells] = (
                        rows_of[:, columns] if isinstance(columns, slice) else rows_of.take(local, axis=1)
                    )
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
    found = []
    for number in range(first // block, last // block + 1) if first <= last else ():
        low, high = max(first - number * block, 0), min(last - number * block, block - 1) + 1
        at = row + number * block + low - first
        if (number, chunk) in ring.open:
            entry = ring.open.open[(number, chunk)]
            if entry is None:  # its rows are in the plain part
                slot = number * block % ring.plain.slots + low
                found.append(_Rows(at, high - low, ring.plain.values[chunk], _times(ring, chunk), slot))
            else:
                found.append(_Rows(at, high - low, entry.bits, entry.times, low))
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
        found.append(_Rows(at, high - low, picked[0], picked[1], None))
    return found


def _plain_rows(ring: SealedRing, chunk: int, buckets: np.ndarray, low: int) -> list[_Rows]:
    """The rows of ``chunk``'s consecutive ``buckets`` in the plain part, the first at row
    ``low``: up to two runs of its slots (it wraps), the rows it does not hold empty."""
    plain = ring.plain
    first, held, end = held_rows(plain.head, plain.slots, buckets)
    found = [_Rows(low, held, None, None, None), _Rows(low + end, len(buckets) - end, None, None, None)]
    slot = (first + held) % plain.slots
    wrap = min(end - held, plain.slots - slot)
    values, times = plain.values[chunk], _times(ring, chunk)
    found.append(_Rows(low + held, wrap, values, times, slot))
    found.append(_Rows(low + held + wrap, end - held - wrap, values, times, 0))
    return found


def _times(ring: SealedRing, chunk: int) -> np.ndarray | None:
    return None if ring.plain.times is None else ring.plain.times[chunk]


def _joined(rows: list[_Rows]) -> list[_Rows]:
    """``rows`` without empty runs, those of the same arrays that follow each other joined."""
    joined: list[_Rows] = []
    for part in rows:
        if not part.height:
            continue
        last = joined[-1] if joined else None
        if (
            last is not None
            and part.slot is not None
            and last.slot is not None
            and last.values is part.values
            and last.row + last.height == part.row
            and last.slot + last.height == part.slot
        ):
            joined[-1] = last._replace(height=last.height + part.height)
        else:
            joined.append(part)
    return joined
