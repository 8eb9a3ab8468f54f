"""A ring of buckets in plain numpy: the plain part of every ring (the finest ring's newest
buckets and a coarse ring's open ones, :mod:`vhms.server.sealed`).

Per ring, chunks of 16,384 series, each a ``[slots, 16384]`` array, time-major: the buckets
of one instant for every series are contiguous, so a time window is a contiguous block of
rows and advancing the ring clears one row. Slot ``b % slots`` holds bucket ``b``
(``b = t // step``); all series share the ring's head (its newest bucket). A bucket is
stored as the bits of its float64 value XOR those of NaN (``encode_values``), so an empty
bucket is zero bits: chunks live in anonymous memory of their own, whose pages the kernel
hands out when first written, and a ring only clears the rows written since their last
clear (``written``). New series thus cost the pages their first samples touch, not their
whole retention at once. The finest ring also keeps, per cell, the time of its sample to the
millisecond, as an offset from the bucket's start (a uint16 when the step is at most
65.536 s, else a uint32); an offset of 0 is never written (an empty cell reads 0 too, and
the later sample stays: a 0 never replaces another time), so samples at their bucket's
start, as the agents' rounds are at the minute, cost no pages of times at all.
"""

from __future__ import annotations

import itertools
import mmap

import numpy as np

from vhms.resolutions import Resolution

__all__ = [
    "CHUNK",
    "EMPTY_BITS",
    "MASK",
    "SHIFT",
    "PlainRing",
    "chunks_of",
    "decode_values",
    "encode_values",
    "held_rows",
    "time_dtype",
    "timed_rows",
]

CHUNK = 1 << 14
SHIFT = 14
MASK = CHUNK - 1
_FIRST_ROOM = 1024  # columns of a ring's first chunk when it is made
EMPTY_BITS = np.float64(np.nan).view(np.uint64)  # an empty bucket is stored as 0


def encode_values(values: np.ndarray) -> np.ndarray:
    """Float64 values as the rings store them: their bits XOR NaN's, so that an empty bucket
    (NaN) is all zero bits, what a fresh page of memory holds."""
    return np.asarray(values, dtype=np.float64).view(np.uint64) ^ EMPTY_BITS


def decode_values(stored: np.ndarray) -> np.ndarray:
    """The float64 values of stored bits (a new array)."""
    return (stored ^ EMPTY_BITS).view(np.float64)


def held_rows(head: int, slots: int, first: int, count: int) -> tuple[int, int]:
    """For ``count`` consecutive buckets from ``first``, the rows ``[low, high)`` of them that
    a ring of ``slots`` buckets up to ``head`` holds."""
    low = min(max(head - slots + 1 - first, 0), count)
    return low, max(min(head + 1 - first, count), low)


def _zeroed(slots: int, room: int, dtype: type) -> np.ndarray:
    """A ``[slots, room]`` array of zeros in anonymous private memory of its own: the kernel
    gives its pages on first write, so a chunk costs memory (and time) only for the rows
    written, and the pages stay small (numpy's own arrays above 4 MB ask for 2 MB huge pages,
    of which one written row of a chunk would fault 16 rows); :func:`_release` gives rows back."""
    size = slots * room * np.dtype(dtype).itemsize
    if size == 0:
        return np.zeros((slots, room), dtype=dtype)
    return np.frombuffer(mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE), dtype=dtype).reshape(slots, room)


def _release(chunk: np.ndarray, rows: np.ndarray) -> None:
    """Zero ``rows`` of a chunk and give their whole pages back to the kernel (a row of 1,024
    columns or more is whole pages)."""
    base = chunk.base
    while isinstance(base, np.ndarray):
        base = base.base
    row_bytes = chunk.shape[1] * chunk.itemsize
    if not isinstance(base, memoryview) or row_bytes % mmap.PAGESIZE:
        chunk[rows, :] = 0
        return
    memory = base.obj
    assert isinstance(memory, mmap.mmap)  # _zeroed made it
    for row in rows.tolist():
        memory.madvise(mmap.MADV_DONTNEED, row * row_bytes, row_bytes)


def timed_rows(times: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Those of ``rows`` of a chunk's sample times that hold a time other than 0. Reading a
    page never written maps the kernel's zero page, which costs no memory: rows of offsets
    0 (samples at their bucket's start, as the agents' rounds are) are never written, and
    clearing or copying them would fault them in."""
    return rows[times[rows].any(axis=1)] if len(rows) else rows


def time_dtype(step_ms: int) -> type:
    """The dtype of the finest ring's sample times (ms from the bucket's start) at a step."""
    return np.uint16 if step_ms <= 1 << 16 else np.uint32


def chunks_of(chunk_of: np.ndarray) -> list[int]:
    """The distinct chunks of ``chunk_of`` (a batch's ids shifted), ascending."""
    return np.flatnonzero(np.bincount(chunk_of.reshape(-1))).tolist()


Columns = slice | np.ndarray  # a run of columns, or any columns
ChunkPart = tuple[int, slice | np.ndarray, Columns]  # a chunk, where its ids are, their columns


def by_chunk(ids: np.ndarray) -> list[ChunkPart]:
    """Per chunk of ``ids`` (1-d, not empty): the chunk, where its ids are (a slice when the
    ids run by chunk, as a batch's do, else a mask) and their columns in it (a slice when
    they are a run, as a batch's series created together are)."""
    chunk_of = ids >> SHIFT
    low, high = int(chunk_of[0]), int(chunk_of[-1])
    if low <= high and (chunk_of[:-1] <= chunk_of[1:]).all():
        edges = np.searchsorted(chunk_of, np.arange(low, high + 2)).tolist()
        parts: list[tuple[int, slice | np.ndarray]] = [
            (low + i, slice(edges[i], edges[i + 1])) for i in range(high + 1 - low) if edges[i] < edges[i + 1]
        ]
    else:
        parts = [(chunk, chunk_of == chunk) for chunk in chunks_of(chunk_of)]
    return [(chunk, where, _run(ids[where] & MASK)) for chunk, where in parts]


def _run(local: np.ndarray) -> Columns:
    """``local`` as a slice when its columns run on one by one (a row's slice is read and
    written 10x faster than its columns taken one by one)."""
    first = int(local[0])
    if int(local[-1]) - first == len(local) - 1 and (np.diff(local) == 1).all():
        return slice(first, first + len(local))
    return local


class PlainRing:
    """``slots`` buckets of every series as plain stored bits (see the module doc); with
    ``timed``, each cell's sample time too."""

    def __init__(self, resolution: Resolution, timed: bool) -> None:
        self.resolution = resolution
        self.step_ms = resolution.step_ms
        self.slots = resolution.slots
        self.aggregate = resolution.aggregate
        self.head = -1  # newest bucket number; -1: nothing yet
        self.values: list[np.ndarray] = []  # uint64: encode_values() of the buckets
        self.times: list[np.ndarray] | None = [] if timed else None  # ms since the bucket's start
        self.time_dtype = time_dtype(self.step_ms)
        self.written: list[np.ndarray] = []  # per chunk, per slot: written since it was cleared
        self.room = 0  # columns allocated: series ids below it have theirs

    def grow(self, series: int) -> None:
        """Room for ``series`` series: whole chunks of ``CHUNK`` columns before the last, the
        last one grown by doubling (at least 1,024 columns), so that a store of a few hundred
        series does not fill 16,384 columns per ring (3,600 one-second slots of them: 470 MB)."""
        if series <= self.room:
            return
        chunks = (series + CHUNK - 1) >> SHIFT
        for index in range(max(len(self.values) - 1, 0), chunks):  # those before are full
            needed = CHUNK if index < chunks - 1 else series - index * CHUNK
            if index < len(self.values):
                have = self.values[index].shape[1]
                if have >= needed:
                    continue
                room = min(CHUNK, max(needed, 2 * have))
            else:
                have, room = 0, min(CHUNK, max(needed, _FIRST_ROOM))
                self.written.append(np.zeros(self.slots, dtype=bool))
            rows = np.flatnonzero(self.written[index])  # the others are zero: nothing to copy
            values = _zeroed(self.slots, room, np.uint64)
            if have:
                values[rows, :have] = self.values[index][rows]
                self.values[index] = values
            else:
                self.values.append(values)
            if self.times is not None:
                grown = _zeroed(self.slots, room, self.time_dtype)
                if have:
                    timed = timed_rows(self.times[index], rows)
                    grown[timed, :have] = self.times[index][timed]
                    self.times[index] = grown
                else:
                    self.times.append(grown)
        self.room = (len(self.values) - 1) * CHUNK + self.values[-1].shape[1] if self.values else 0

    def covers(self, bucket: np.ndarray) -> np.ndarray:
        return (bucket > self.head - self.slots) & (bucket <= self.head)

    def advance(self, newest: int) -> None:
        """Make ``newest`` the head, clearing the slots of the buckets it recycles (only the
        rows written since they were last cleared: the others are empty already)."""
        if newest <= self.head:
            return
        first = max(self.head + 1, newest - self.slots + 1)
        self.release(np.arange(first, newest + 1, dtype=np.int64) % self.slots, give_back=False)
        self.head = newest

    def release(self, slots: np.ndarray, give_back: bool = True, chunk: int | None = None) -> None:
        """Empty ``slots`` of every chunk (or of ``chunk``; those written since their last
        clear); with ``give_back`` their memory returns to the kernel (rows kept elsewhere,
        compressed)."""
        for index, written in enumerate(self.written):
            if chunk is not None and index != chunk:
                continue
            rows = slots[written[slots]]
            if not len(rows):
                continue
            if give_back:
                _release(self.values[index], rows)
            else:
                self.values[index][rows, :] = 0
            if self.times is not None:
                self.times[index][timed_rows(self.times[index], rows), :] = 0
            written[rows] = False

    def gather(self, buckets: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The values of ``(buckets[i], ids[i])`` (any shapes that broadcast; buckets held)."""
        slots = buckets % self.slots
        out = np.empty(np.broadcast(slots, ids).shape, dtype=np.uint64)
        chunk_of = ids >> SHIFT
        slots_b, ids_b = np.broadcast_arrays(slots, ids)
        chunk_b = np.broadcast_to(chunk_of, out.shape)
        for chunk in chunks_of(chunk_of):
            where = chunk_b == chunk
            out[where] = self.values[chunk][slots_b[where], ids_b[where] & MASK]
        return decode_values(out)

    def take_row(self, bucket: int, parts: list[ChunkPart], count: int) -> np.ndarray:
        """The values in ``bucket`` (one the ring holds) of the ``count`` ids split by
        :func:`by_chunk`: along its row of each chunk, 4-10x faster than indexing cells by
        (row, column) pairs."""
        slot = bucket % self.slots
        out = np.empty(count, dtype=np.uint64)
        for chunk, where, local in parts:
            out[where] = self.values[chunk][slot][local]
        return decode_values(out)

    def put_row(self, bucket: int, parts: list[ChunkPart], values: np.ndarray) -> None:
        """Write ``values`` in ``bucket`` (one the ring holds) for the ids split by
        :func:`by_chunk`, along its row of each chunk."""
        slot = bucket % self.slots
        stored = encode_values(values)
        for chunk, where, local in parts:
            self.values[chunk][slot][local] = stored[where]
            self.written[chunk][slot] = True

    def scatter(self, buckets: np.ndarray, ids: np.ndarray, values: np.ndarray) -> None:
        self.put(buckets % self.slots, ids, encode_values(values))

    def put(self, slots: np.ndarray, ids: np.ndarray, stored: np.ndarray) -> None:
        """Write stored bits at ``(slots[i], ids[i])``."""
        chunk_of = ids >> SHIFT
        first = chunk_of[0] if len(chunk_of) else 0
        if len(chunk_of) and (chunk_of == first).all():
            self.values[int(first)][slots, ids & MASK] = stored
            self.written[int(first)][slots] = True
            return
        for chunk in chunks_of(chunk_of):
            where = chunk_of == chunk
            self.values[chunk][slots[where], ids[where] & MASK] = stored[where]
            self.written[chunk][slots[where]] = True

    def fill(
        self,
        ids: np.ndarray,
        buckets: np.ndarray,
        out: np.ndarray,
        times: bool = False,
        decoded: bool = False,
    ) -> None:
        """Copy into time-major ``out`` ``[buckets, ids]`` (zeros) the cells of sorted ``ids``
        (their stored bits, or with ``times`` their sample times) where the ring holds the
        bucket, for consecutive ``buckets`` (a run of bucket numbers), a block of rows at a
        time (slices where the ids or the slots are contiguous). With ``decoded``, ``out``
        may hold anything: every cell is written, with the float64 bits of its value (NaN's
        where the ring holds no bucket), decoded in the copy itself rather than in a second
        pass over the answer."""
        source = self.times if times else self.values
        assert source is not None  # times are asked of the finest ring only
        first = int(buckets[0]) if len(buckets) else 0
        low, high = held_rows(self.head, self.slots, first, len(buckets))
        if decoded:
            out[:low] = EMPTY_BITS
            out[high:] = EMPTY_BITS
        if low == high or not len(ids):
            return
        first_slot = (first + low) % self.slots
        wrap = min(high - low, self.slots - first_slot)  # the ring wraps after this many rows
        runs = [(low, low + wrap, first_slot), (low + wrap, high, 0)]
        chunk_of = ids >> SHIFT
        if chunk_of[0] == chunk_of[-1]:  # ids are sorted: one chunk
            edges = [0, len(ids)]
        else:
            edges = [0, *(np.flatnonzero(np.diff(chunk_of)) + 1).tolist(), len(ids)]
        for start, stop in itertools.pairwise(edges):
            local = ids[start:stop] & MASK
            left, right = int(local[0]), int(local[-1])
            chunk = source[int(chunk_of[start])]
            for row, end, slot in runs:
                if row == end:
                    continue
                rows = chunk[slot : slot + end - row]
                contiguous = right - left == stop - start - 1
                block = rows[:, left : right + 1] if contiguous else np.take(rows, local, axis=1)
                if decoded:
                    np.bitwise_xor(block, EMPTY_BITS, out=out[row:end, start:stop])
                else:
                    out[row:end, start:stop] = block

    def export(self, first: int, stop: int, times: bool = False) -> np.ndarray:
        """The ``[slots, stop - first]`` stored bits (or sample times) of the series ``[first,
        stop)``, copied from each chunk's used part only: a chunk has room for ``CHUNK`` series
        (a ring of 3,600 one-second buckets: 1.9 GB of it), and copying its whole capacity
        held the store's lock for seconds."""
        source = self.times if times else self.values
        assert source is not None
        dtype = self.time_dtype if times else np.uint64
        used = [
            chunk[:, max(first - start, 0) : stop - start]
            for start, chunk in zip(range(0, stop, CHUNK), source, strict=False)
            if start + CHUNK > first
        ]
        if not used:  # an empty store, or no chunk allocated yet: still ``slots`` rows
            return np.zeros((self.slots, stop - first), dtype=dtype)
        return np.concatenate(used, axis=1)

    def load(self, columns: np.ndarray, times: bool = False) -> None:
        """Fill the first ``columns.shape[1]`` series from ``[slots, count]`` (grown already)."""
        source = self.times if times else self.values
        assert source is not None
        for index, chunk in enumerate(source):
            part = columns[:, index * CHUNK : (index + 1) * CHUNK]
            rows = np.flatnonzero(part.any(axis=1)) if times else slice(None)  # zero rows: no pages
            chunk[rows, : part.shape[1]] = part[rows]
        for written in self.written:
            written[:] = True
