"""A ring whose closed buckets are kept compressed a block at a time: the machinery the coarse
rings (:mod:`vhms.server.coarse`) and the finest ring (:mod:`vhms.server.finest`) share.

::

      sealed blocks, K buckets each (vhms.server.codec)  | plain rows (vhms.server.rings): a block
    ... | block B-2 | block B-1 |                        | being encoded, the closed ones of the
                                                         | block not yet whole, the open buckets
    <---------------------- slots buckets (the retention) ---------------------------> head

What is **closed** is the subclass's (:meth:`SealedRing.closed`): the newest bucket that
ingest will rarely write again. Blocks are numbered ``b // K``; a block closes as soon as its
last bucket is closed, and is then encoded for each chunk of series (its plain rows given
back to the kernel) a slice of columns per advance, by the time the plain part recycles its
slots (:mod:`vhms.server.open_blocks`: the plain part is a whole number of blocks, sized by
the subclass to hold the open buckets, a block not yet whole and one being encoded). A
block leaves when its last bucket leaves the retention. A write into a closed bucket goes to
its block of the chunk, decoded once to take writes and encoded again later. Reads take an
open block's rows as they are, and a sealed block of a chunk at a time through the store's
cache of decoded blocks (:mod:`vhms.server.decoded`), or around it when the read would
decode more than the cache holds (a whole store's hours would only evict what dashboards
ask again). A timed ring (the finest) seals its sample times too, as blocks of their own: an
offset ``t`` (ms from the bucket's start) as the stored bits of the float ``t``, an offset 0
as an empty bucket (so a block of samples at their buckets' starts, as the agents' rounds
are, is no block at all).
"""

from __future__ import annotations

import itertools

import numpy as np

from vhms.resolutions import Resolution
from vhms.server.codec import Block
from vhms.server.decoded import WHOLE_FRACTION, DecodedBlocks
from vhms.server.open_blocks import Blocks, OpenBlocks, encoded, offsets_of, offsets_stored, put
from vhms.server.rings import (
    CHUNK,
    EMPTY_BITS,
    MASK,
    SHIFT,
    ChunkPart,
    PlainRing,
    decode_values,
    encode_values,
    held_rows,
)

__all__ = ["MAX_BLOCK", "SealedRing", "column_runs"]

MAX_BLOCK = 24


class SealedRing:
    """``resolution``'s buckets, the last ``plain_slots`` of them plain at least and the closed
    ones sealed in blocks of ``block`` (see the module doc); with ``timed``, sample times too.
    ``name`` prefixes its counters in the cache's ``stats`` (the store's); with ``spread``, a
    closed block is encoded over the advances before its deadline, else at once."""

    def __init__(
        self,
        resolution: Resolution,
        plain_slots: int,
        block: int,
        cache: DecodedBlocks,
        timed: bool,
        name: str,
        spread: bool = False,
    ) -> None:
        self.resolution = resolution
        self.step_ms = resolution.step_ms
        self.slots = resolution.slots
        self.aggregate = resolution.aggregate
        self.cache = cache
        self.stats = cache.stats
        self.name = name
        self.block = block
        plain_slots = -(-plain_slots // block) * block  # a block's rows are a run of slots
        self.plain = PlainRing(Resolution(resolution.step_s, plain_slots, resolution.aggregate), timed=timed)
        self.blocks: Blocks = {}
        self.time_blocks: Blocks | None = {} if timed else None
        self.sealed: int | None = None  # blocks below it are closed (or gone); None: nothing yet
        self.open = OpenBlocks(
            self.plain,
            block,
            (self.blocks, self.time_blocks),
            (cache, self.step_ms),
            (cache.stats, name),
            bound=2 * (self.slots // block + 1),  # decoded: the retention of two chunks of series
            spread=spread,
        )

    @property
    def head(self) -> int:
        return self.plain.head

    @head.setter
    def head(self, value: int) -> None:
        self.plain.head = value

    @property
    def room(self) -> int:
        return self.plain.room

    @property
    def time_dtype(self) -> type:
        return self.plain.time_dtype

    def grow(self, series: int) -> None:
        self.plain.grow(series)

    def covers(self, bucket: np.ndarray) -> np.ndarray:
        return (bucket > self.head - self.slots) & (bucket <= self.head)

    def closed(self, newest: int) -> int:
        """The newest bucket that is closed once ``newest`` is the head."""
        raise NotImplementedError

    def advance(self, newest: int) -> None:
        """Make ``newest`` the head: close the blocks closed by then (encoding those whose plain
        rows it recycles), recycle plain slots, forget blocks past the retention, and encode
        a share of the open blocks (see the module doc)."""
        if newest <= self.head:
            return
        oldest = newest - self.slots + 1
        done = (self.closed(newest) + 1) // self.block
        first = oldest // self.block if self.sealed is None else max(self.sealed, oldest // self.block)
        for number in range(first, done):
            self.open.close(number)
        self.sealed = max(done, first)
        self.open.seal_due(newest)
        self.plain.advance(newest)
        gone = oldest // self.block  # blocks below it have left the retention
        self.open.forget_before(gone)
        for blocks, key in [(self.blocks, self.step_ms), (self.time_blocks or {}, -self.step_ms)]:
            for number in [n for n in blocks if n < gone]:
                del blocks[number]
                self.cache.forget(key, number)
        self.open.share(newest)

    def seal_open(self) -> None:
        """Encode every open block (a bulk writer done: a catch-up)."""
        self.open.seal_all()

    def stored(self, number: int, chunk: int, times: bool = False) -> np.ndarray | Block | None:
        """What holds block ``number`` of ``chunk``'s stored bits (or sample times): its open
        ``[K, m]`` array, its sealed block, or None (empty)."""
        key = (number, chunk)
        if key in self.open:
            bits, offsets = self.open.arrays(key)
            return offsets if times else bits
        blocks = self._source(times)[0]
        chunks = blocks.get(number)
        return chunks[chunk] if chunks is not None and chunk < len(chunks) else None

    def is_sealed(self, buckets: np.ndarray) -> np.ndarray:
        if self.sealed is None:
            return np.zeros(buckets.shape, dtype=bool)
        return buckets < self.sealed * self.block

    def _source(self, times: bool) -> tuple[Blocks, int]:
        """The blocks of values (or sample times) and their key in the cache."""
        if times:
            assert self.time_blocks is not None  # times are asked of a timed ring only
            return self.time_blocks, -self.step_ms
        return self.blocks, self.step_ms

    def gather(self, buckets: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The values of ``(buckets[i], ids[i])`` (any shapes that broadcast; buckets held)."""
        shape = np.broadcast(buckets, ids).shape
        buckets, ids = (np.ascontiguousarray(a).reshape(-1) for a in np.broadcast_arrays(buckets, ids))
        sealed = self.is_sealed(buckets)
        out = np.zeros(len(ids), dtype=np.uint64)
        if (~sealed).any():
            out[~sealed] = encode_values(self.plain.gather(buckets[~sealed], ids[~sealed]))
        for number, chunk, where in self.groups(buckets, ids, sealed):
            source = self.stored(number, chunk)
            rows = buckets[where] - number * self.block
            if isinstance(source, np.ndarray):
                out[where] = source[rows, ids[where] & MASK]
            elif source is not None:
                local, inverse = np.unique(ids[where] & MASK, return_inverse=True)
                out[where] = source.decode(local)[rows, inverse]
        return decode_values(out).reshape(shape)

    def put_row(self, bucket: int, parts: list[ChunkPart], values: np.ndarray) -> None:
        """Write ``values`` in an open ``bucket`` (never sealed: its rows are plain) for the
        ids split by ``rings.by_chunk``."""
        self.plain.put_row(bucket, parts, values)

    def scatter(self, buckets: np.ndarray, ids: np.ndarray, values: np.ndarray) -> None:
        """Write ``values`` at ``(buckets[i], ids[i])`` (1-d, buckets the ring covers); a sealed
        block's chunk is decoded, changed and encoded again."""
        stored = encode_values(values)
        sealed = self.is_sealed(buckets)
        if (~sealed).any():
            self.plain.put(buckets[~sealed] % self.plain.slots, ids[~sealed], stored[~sealed])
        for number, chunk, where in self.groups(buckets, ids, sealed):
            rows = buckets[where] - number * self.block
            bits, _ = self.open.opened((number, chunk), rows)
            bits[rows, ids[where] & MASK] = stored[where]

    def groups(
        self, buckets: np.ndarray, ids: np.ndarray, sealed: np.ndarray
    ) -> list[tuple[int, int, np.ndarray]]:
        """Per (block, chunk) of the sealed cells (1-d): the block's number, the chunk and the
        cells' indices."""
        cells = np.flatnonzero(sealed)
        if not len(cells):
            return []
        numbers, chunk_of = buckets[cells] // self.block, ids[cells] >> SHIFT
        key = (numbers - numbers.min()) * (int(chunk_of.max()) + 1) + chunk_of
        order = np.argsort(key, kind="stable")
        parts = np.split(cells[order], np.flatnonzero(np.diff(key[order])) + 1)
        return [(int(buckets[part[0]]) // self.block, int(ids[part[0]]) >> SHIFT, part) for part in parts]

    def fill(
        self,
        ids: np.ndarray,
        buckets: np.ndarray,
        out: np.ndarray,
        times: bool = False,
        decoded: bool = False,
        cached: bool = True,
    ) -> None:
        """Copy into time-major ``out`` ``[buckets, ids]`` (zeros) the stored bits (or with
        ``times`` the sample times) of sorted ``ids`` where the ring holds the bucket: the plain
        rows as they are, the sealed blocks' a block of each chunk at a time, through the cache
        of decoded blocks unless ``cached`` is false (a snapshot reads every block once: it
        would only evict the blocks that fetches ask again). With ``decoded`` as
        :meth:`PlainRing.fill`'s: every cell written, with its value's float64 bits.
        ``buckets`` are consecutive (a run of bucket numbers), as :meth:`PlainRing.fill`'s:
        which rows are held, sealed or plain is arithmetic on the first."""
        first = int(buckets[0]) if len(buckets) else 0
        low, high = held_rows(self.head, self.slots, first, len(buckets))
        plain = self.first_plain_row(first, low, high)
        if plain < high:
            self.plain.fill(ids, buckets[plain:high], out[plain:high], times=times, decoded=decoded)
        if decoded:
            out[:low] = EMPTY_BITS
            out[high:] = EMPTY_BITS
        if low < plain and len(ids):
            self._fill_sealed(ids, (first + low, first + plain - 1), out[low:plain], (cached, times, decoded))

    def first_plain_row(self, first: int, low: int, high: int) -> int:
        """Of the held rows ``[low, high)`` of buckets from ``first``, the first one not sealed
        (the sealed buckets are the oldest held)."""
        return low if self.sealed is None else min(max(self.sealed * self.block - first, low), high)

    def reads_through_cache(self, runs: list[ColumnRun], blocks: int) -> bool:
        """Whether a read of ``blocks`` sealed blocks of the columns ``runs``
        (:func:`column_runs`) goes through the cache of decoded blocks: not when it would
        decode more than the cache holds (it would only evict what dashboards ask again)."""
        width = sum(CHUNK if WHOLE_FRACTION * len(run[3]) >= CHUNK else len(run[3]) for run in runs)
        return blocks * width * self.block * 8 <= self.cache.budget

    def _fill_sealed(
        self, ids: np.ndarray, span: tuple[int, int], out: np.ndarray, how: tuple[bool, bool, bool]
    ) -> None:
        """:meth:`fill`'s rows of the sealed buckets ``span`` (first and last), ``out``'s rows,
        as the blocks hold them (``how``: cached, times, decoded): every cell written with
        ``decoded``. The blocks of a run of columns are gathered as views and written with
        one copy (and one conversion) per run of blocks alike: a small read spans dozens of
        blocks of a few columns, and a numpy call per block was most of its time."""
        cached, times, decoded = how
        runs = column_runs(ids)
        first, last = span
        block = self.block
        spans = [
            (number, slice(max(first - number * block, 0), min(last - number * block, block - 1) + 1))
            for number in range(first // block, last // block + 1)
        ]
        cached = cached and self.reads_through_cache(runs, len(spans))
        for start, stop, chunk, local, columns in runs:
            parts = [
                self._part(number, chunk, within, (local, columns), (cached, times))
                for number, within in spans
            ]
            target = out[:, start:stop]
            row = 0
            for is_open, group in itertools.groupby(parts, key=lambda part: part[0] and times):
                arrays = [array for _, array in group]
                region = target[row : row + sum(len(array) for array in arrays)]
                row += len(region)
                if times and not is_open:
                    region[...] = offsets_of(np.concatenate(arrays), self.time_dtype)
                else:
                    np.concatenate(arrays, out=region)
                if decoded:
                    np.bitwise_xor(region, EMPTY_BITS, out=region)

    def _part(
        self,
        number: int,
        chunk: int,
        within: slice,
        columns: tuple[np.ndarray, slice | np.ndarray],
        how: tuple[bool, bool],
    ) -> tuple[bool, np.ndarray]:
        """Whether block ``number`` of ``chunk`` is open, and its ``within`` rows of the
        columns (local ids, and a slice of them where they are a run) as it holds them:
        an open block's bits or sample times, a sealed one's stored bits (zeros: empty)."""
        cached, times = how
        local, picked = columns
        source = self.stored(number, chunk, times)
        if source is None:
            return False, np.zeros((within.stop - within.start, len(local)), dtype=np.uint64)
        if isinstance(source, np.ndarray):
            return True, source[within, picked] if isinstance(picked, slice) else source[within][:, picked]
        if cached:
            return False, self.cache.read((self._source(times)[1], number, chunk), source, local)[within]
        return False, source.decode(local)[within]

    def export(self, first: int, stop: int, times: bool = False) -> np.ndarray:
        """The ``[slots, stop - first]`` stored bits (or sample times) of the series ``[first,
        stop)``, bucket ``b`` at ``b % slots`` (a snapshot's layout)."""
        dtype = self.time_dtype if times else np.uint64
        out: np.ndarray = np.zeros((self.slots, stop - first), dtype=dtype)
        if self.head < 0 or stop <= first:
            return out
        buckets = np.arange(self.head - self.slots + 1, self.head + 1, dtype=np.int64)
        rows: np.ndarray = np.zeros((len(buckets), stop - first), dtype=dtype)
        for low in range(first, stop, 1 << SHIFT):  # bounded temporaries
            high = min(low + (1 << SHIFT), stop)
            ids = np.arange(low, high, dtype=np.int64)
            self.fill(ids, buckets, rows[:, low - first : high - first], times=times, cached=False)
        out[buckets % self.slots] = rows
        return out

    def load(self, columns: np.ndarray, times: bool = False) -> None:
        """Fill the first ``columns.shape[1]`` series from ``[slots, count]`` in a snapshot's
        layout (the head set and the ring grown; a coarse ring after the finest)."""
        blocks, key = self._source(times)
        blocks.clear()
        self.open.clear()
        self.cache.forget(key)
        if self.head < 0:
            return
        buckets = np.arange(self.head - self.slots + 1, self.head + 1, dtype=np.int64)
        self.sealed = (self.closed(self.head) + 1) // self.block
        sealed = self.is_sealed(buckets)
        for number in np.unique(buckets[sealed] // self.block).tolist():
            held = buckets[sealed & (buckets // self.block == number)]
            block = np.zeros((self.block, columns.shape[1]), dtype=np.uint64)
            rows = columns[held % self.slots]
            block[held - number * self.block] = offsets_stored(rows) if times else rows
            for index, first in enumerate(range(0, columns.shape[1], CHUNK)):
                put(blocks, (number, index), encoded(block[:, first : first + CHUNK]))
        source = self.plain.times if times else self.plain.values
        assert source is not None
        for bucket in buckets[~sealed].tolist():
            row = columns[bucket % self.slots]
            slot = bucket % self.plain.slots
            for index, chunk in enumerate(source):
                part = row[index << SHIFT : (index + 1) << SHIFT]
                if part.any() or not times:
                    chunk[slot, : len(part)] = part
                self.plain.written[index][slot] = True

    def nbytes(self) -> tuple[int, int]:
        """Bytes of the plain rows written (all series' room; blocks decoded to take writes
        counted as plain) and of the sealed blocks."""
        plain = sum(
            int(w.sum()) * chunk.shape[1] * 8
            for w, chunk in zip(self.plain.written, self.plain.values, strict=True)
        )
        plain += self.open.decoded_bytes()
        every = [*self.blocks.values(), *(self.time_blocks or {}).values()]
        sealed = sum(b.nbytes for chunks in every for b in chunks if b is not None)
        return plain, sealed


# a run of sorted ids in one chunk: its positions [start, stop), its chunk, its local ids, and
# those as a slice where they are contiguous
ColumnRun = tuple[int, int, int, np.ndarray, slice | np.ndarray]


def column_runs(ids: np.ndarray) -> list[ColumnRun]:
    """Sorted ``ids`` by chunk: each run's positions ``[start, stop)``, its chunk, its local
    ids, and those as a slice where they are contiguous."""
    low, high = int(ids[0]) >> SHIFT, int(ids[-1]) >> SHIFT
    if low == high:  # one chunk
        edges = [0, len(ids)]
    else:
        edges = [0, *(np.flatnonzero(np.diff(ids >> SHIFT)) + 1).tolist(), len(ids)]
    runs = []
    for start, stop in itertools.pairwise(edges):
        local = ids[start:stop] & MASK
        left, right = int(local[0]), int(local[-1])
        columns = slice(left, right + 1) if right - left == stop - start - 1 else local
        runs.append((start, stop, (int(ids[start]) >> SHIFT), local, columns))
    return runs
