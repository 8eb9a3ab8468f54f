"""A coarse ring: its open buckets plain, its closed ones compressed a block at a time.

A coarse bucket is **closed** once every finest bucket inside it has left the finest ring:
ingest can no longer recompute it, only merge a sample older than the finest ring into it
(``last`` of an empty bucket, ``min``, ``max``), which is rare. So a coarse ring keeps::

      sealed blocks, K buckets each (vhms.server.codec)      | plain rows (vhms.server.rings)
    ... | block B-2 | block B-1 |                            | closed ones of the block not yet
                                                             | whole, and the open buckets
    <---------------------- slots buckets (the retention) ---------------------------> head

Blocks are numbered ``b // K``; a block is sealed (encoded for each chunk of series, its plain
rows given back to the kernel) as soon as its last bucket is closed. The plain part is a
ring of ``ceil(finest slots / ratio) + K + 2`` slots: enough for the open buckets and the
closed ones of an unsealed block, so a slot is never recycled before its bucket is sealed.
A block leaves when its last bucket leaves the retention. A late sample for a sealed bucket
decodes that block's chunk, changes it and encodes it again (and drops it from the cache).
Reads take a sealed block of a chunk at a time through the store's cache of decoded blocks
(:mod:`vhms.server.decoded`).
"""

from __future__ import annotations

import itertools

import numpy as np

from vhms.resolutions import Resolution
from vhms.server.codec import Block, encode_block
from vhms.server.decoded import DecodedBlocks
from vhms.server.rings import EMPTY_BITS, MASK, SHIFT, ChunkPart, PlainRing, decode_values, encode_values

__all__ = ["CoarseRing"]

_MAX_BLOCK = 24


class CoarseRing:
    """A coarse resolution's buckets (see the module doc), rolled up from ``finest``."""

    times = None  # only the finest ring keeps sample times

    def __init__(self, resolution: Resolution, finest: PlainRing, cache: DecodedBlocks) -> None:
        self.resolution = resolution
        self.step_ms = resolution.step_ms
        self.slots = resolution.slots
        self.aggregate = resolution.aggregate
        self.finest = finest
        self.cache = cache
        self.ratio = self.step_ms // finest.step_ms
        self.block = max(1, min(self.slots // 4, _MAX_BLOCK))
        plain_slots = -(-finest.slots // self.ratio) + self.block + 2
        self.plain = PlainRing(Resolution(resolution.step_s, plain_slots, resolution.aggregate), timed=False)
        self.blocks: dict[int, list[Block | None]] = {}  # block number -> per chunk (None: empty)
        self.sealed: int | None = None  # blocks below it are sealed (or gone); None: nothing yet

    @property
    def head(self) -> int:
        return self.plain.head

    @head.setter
    def head(self, value: int) -> None:
        self.plain.head = value

    @property
    def room(self) -> int:
        return self.plain.room

    def grow(self, series: int) -> None:
        self.plain.grow(series)

    def covers(self, bucket: np.ndarray) -> np.ndarray:
        return (bucket > self.head - self.slots) & (bucket <= self.head)

    def closed(self) -> int:
        """The newest bucket none of whose finest buckets the finest ring still holds."""
        finest = self.finest
        return (finest.head - finest.slots + 1) // self.ratio - 1

    def advance(self, newest: int) -> None:
        """Make ``newest`` the head: seal the blocks closed by now (the finest ring has moved
        first), then recycle plain slots and forget blocks past the retention."""
        if newest <= self.head:
            return
        oldest = newest - self.slots + 1
        done = (self.closed() + 1) // self.block
        first = oldest // self.block if self.sealed is None else max(self.sealed, oldest // self.block)
        for number in range(first, done):
            self._seal(number)
        self.sealed = max(done, first)
        self.plain.advance(newest)
        for number in [n for n in self.blocks if (n + 1) * self.block <= oldest]:
            del self.blocks[number]
            self.cache.forget(self.step_ms, number)

    def _buckets(self, number: int) -> np.ndarray:
        return np.arange(number * self.block, (number + 1) * self.block, dtype=np.int64)

    def _seal(self, number: int) -> None:
        """Encode block ``number`` from the plain rows, chunk by chunk, and give the rows back."""
        buckets = self._buckets(number)
        held = buckets[self.plain.covers(buckets)]
        slots = held % self.plain.slots
        encoded: list[Block | None] = []
        for index, chunk in enumerate(self.plain.values):
            if not self.plain.written[index][slots].any():
                encoded.append(None)
                continue
            stored = np.zeros((self.block, chunk.shape[1]), dtype=np.uint64)
            stored[held - buckets[0]] = chunk[slots]
            encoded.append(encode_block(stored))
        if any(each is not None for each in encoded):
            self.blocks[number] = encoded
        self.plain.release(slots)

    def _is_sealed(self, buckets: np.ndarray) -> np.ndarray:
        if self.sealed is None:
            return np.zeros(buckets.shape, dtype=bool)
        return buckets < self.sealed * self.block

    def _chunk_block(self, number: int, chunk: int) -> Block | None:
        chunks = self.blocks.get(number)
        return chunks[chunk] if chunks is not None and chunk < len(chunks) else None

    def gather(self, buckets: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The values of ``(buckets[i], ids[i])`` (1-d, buckets the ring covers)."""
        sealed = self._is_sealed(buckets)
        out = np.zeros(len(ids), dtype=np.uint64)
        if (~sealed).any():
            out[~sealed] = encode_values(self.plain.gather(buckets[~sealed], ids[~sealed]))
        for number, chunk, where in self._groups(buckets, ids, sealed):
            encoded = self._chunk_block(number, chunk)
            if encoded is None:
                continue
            local, inverse = np.unique(ids[where] & MASK, return_inverse=True)
            out[where] = encoded.decode(local)[buckets[where] - number * self.block, inverse]
        return decode_values(out)

    def put_row(self, bucket: int, parts: list[ChunkPart], values: np.ndarray) -> None:
        """Write ``values`` in an open ``bucket`` (never sealed: its rows are plain) for the
        ids split by ``rings.by_chunk``."""
        self.plain.put_row(bucket, parts, values)

    def scatter(self, buckets: np.ndarray, ids: np.ndarray, values: np.ndarray) -> None:
        """Write ``values`` at ``(buckets[i], ids[i])`` (1-d, buckets the ring covers); a sealed
        block's chunk is decoded, changed and encoded again."""
        stored = encode_values(values)
        sealed = self._is_sealed(buckets)
        if (~sealed).any():
            self.plain.put(buckets[~sealed] % self.plain.slots, ids[~sealed], stored[~sealed])
        for number, chunk, where in self._groups(buckets, ids, sealed):
            encoded = self._chunk_block(number, chunk)
            local = ids[where] & MASK
            width = max(encoded.series if encoded else 0, int(local.max()) + 1)
            block = encoded.decode(np.arange(width)) if encoded else np.zeros((self.block, width), np.uint64)
            block[buckets[where] - number * self.block, local] = stored[where]
            chunks = self.blocks.setdefault(number, [])
            chunks.extend([None] * (chunk + 1 - len(chunks)))
            chunks[chunk] = encode_block(block)
            self.cache.forget(self.step_ms, number, chunk)

    def _groups(
        self, buckets: np.ndarray, ids: np.ndarray, sealed: np.ndarray
    ) -> list[tuple[int, int, np.ndarray]]:
        """Per (block, chunk) of the sealed cells: the block's number, the chunk and where."""
        if not sealed.any():
            return []
        numbers = np.where(sealed, buckets // self.block, 0)
        chunk_of = ids >> SHIFT
        pairs = np.unique(np.stack([numbers[sealed], chunk_of[sealed]]), axis=1).T.tolist()
        return [(n, c, sealed & (numbers == n) & (chunk_of == c)) for n, c in pairs]

    def fill(
        self,
        ids: np.ndarray,
        buckets: np.ndarray,
        out: np.ndarray,
        cached: bool = True,
        decoded: bool = False,
    ) -> None:
        """Copy into time-major ``out`` ``[buckets, ids]`` (zeros) the stored bits of sorted
        ``ids`` where the ring holds the bucket: the plain rows as they are, the sealed
        blocks' a block of each chunk at a time, through the cache of decoded blocks unless
        ``cached`` is false (a snapshot reads every block once: it would only evict the
        blocks that fetches ask again). With ``decoded`` as :meth:`PlainRing.fill`'s: every
        cell written, with its value's float64 bits."""
        covered = self.covers(buckets)
        sealed = covered & self._is_sealed(buckets)
        plain = np.flatnonzero(covered & ~sealed)
        rest = np.ones(len(buckets), dtype=bool)  # the rows not plain: sealed, or not held
        if len(plain):
            low, high = int(plain[0]), int(plain[-1]) + 1
            rest[low:high] = False
            self.plain.fill(ids, buckets[low:high], out[low:high], decoded=decoded)
        if decoded and rest.any():
            out[rest] = 0
            self._fill_sealed(ids, buckets, out, sealed, cached)
            out[rest] ^= EMPTY_BITS
        else:
            self._fill_sealed(ids, buckets, out, sealed, cached)

    def _fill_sealed(
        self, ids: np.ndarray, buckets: np.ndarray, out: np.ndarray, sealed: np.ndarray, cached: bool
    ) -> None:
        """:meth:`fill`'s rows of the ``sealed`` buckets, stored bits as the blocks hold them."""
        if not len(ids) or not sealed.any():
            return
        chunk_of = ids >> SHIFT
        edges = [0, *(np.flatnonzero(np.diff(chunk_of)) + 1).tolist(), len(ids)]  # ids are sorted
        runs = [
            (start, stop, int(chunk_of[start]), ids[start:stop] & MASK)
            for start, stop in itertools.pairwise(edges)
        ]
        held = np.flatnonzero(sealed)  # a run of rows: the sealed buckets are the oldest covered
        first, last = int(buckets[held[0]]), int(buckets[held[-1]])
        for number in range(first // self.block, last // self.block + 1):
            chunks = self.blocks.get(number)
            if chunks is None:
                continue
            low, high = max(first, number * self.block), min(last, (number + 1) * self.block - 1)
            rows = slice(int(held[0]) + low - first, int(held[0]) + high - first + 1)
            within = slice(low - number * self.block, high - number * self.block + 1)
            for start, stop, chunk, local in runs:
                encoded = chunks[chunk] if chunk < len(chunks) else None
                if encoded is None:
                    continue
                if cached:
                    decoded = self.cache.read((self.step_ms, number, chunk), encoded, local)
                else:
                    decoded = encoded.decode(local)
                out[rows, start:stop] = decoded[within]

    def export(self, first: int, stop: int) -> np.ndarray:
        """The ``[slots, stop - first]`` stored bits of the series ``[first, stop)``, bucket
        ``b`` at ``b % slots`` (a snapshot's layout)."""
        out = np.zeros((self.slots, stop - first), dtype=np.uint64)
        if self.head < 0 or stop <= first:
            return out
        buckets = np.arange(self.head - self.slots + 1, self.head + 1, dtype=np.int64)
        rows = np.zeros((len(buckets), stop - first), dtype=np.uint64)
        for low in range(first, stop, 1 << SHIFT):  # bounded temporaries
            high = min(low + (1 << SHIFT), stop)
            ids = np.arange(low, high, dtype=np.int64)
            self.fill(ids, buckets, rows[:, low - first : high - first], cached=False)
        out[buckets % self.slots] = rows
        return out

    def load(self, columns: np.ndarray) -> None:
        """Fill the first ``columns.shape[1]`` series from ``[slots, count]`` in a snapshot's
        layout (the head set, the ring grown and the finest ring loaded first)."""
        self.blocks.clear()
        self.cache.forget(self.step_ms)
        if self.head < 0:
            return
        buckets = np.arange(self.head - self.slots + 1, self.head + 1, dtype=np.int64)
        self.sealed = (self.closed() + 1) // self.block
        sealed = self._is_sealed(buckets)
        for number in np.unique(buckets[sealed] // self.block).tolist():
            held = buckets[sealed & (buckets // self.block == number)]
            block = np.zeros((self.block, columns.shape[1]), dtype=np.uint64)
            block[held - number * self.block] = columns[held % self.slots]
            self.blocks[number] = [
                encode_block(block[:, first : first + (1 << SHIFT)])
                for first in range(0, columns.shape[1], 1 << SHIFT)
            ]
        for bucket in buckets[~sealed].tolist():
            row = columns[bucket % self.slots]
            slot = bucket % self.plain.slots
            for index, chunk in enumerate(self.plain.values):
                part = row[index << SHIFT : (index + 1) << SHIFT]
                chunk[slot, : len(part)] = part
                self.plain.written[index][slot] = True

    def nbytes(self) -> tuple[int, int]:
        """Bytes of the plain rows written (all series' room) and of the sealed blocks."""
        plain = sum(
            int(w.sum()) * chunk.shape[1] * 8
            for w, chunk in zip(self.plain.written, self.plain.values, strict=True)
        )
        sealed = sum(b.nbytes for chunks in self.blocks.values() for b in chunks if b is not None)
        return plain, sealed
