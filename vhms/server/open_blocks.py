"""The closed blocks of a sealed ring (:mod:`vhms.server.sealed`) that are not encoded: not
yet, or decoded again to take writes, one per (block, chunk of series).

- **In the plain part**: a block that has just closed keeps its rows where they are (the
  plain part's slots are a whole number of blocks, so a block's rows are a run of them) and
  is encoded a slice of ``SLICE`` columns at a time, a share of what is left at each advance
  of the ring, so that every open block is encoded before its deadline: the advance that
  recycles its slots (then it is encoded whole, as a jump of the head needs). The finest
  ring spreads them so (a round every minute closes a bucket); a coarse ring, whose
  advances are minutes to an hour apart, encodes its blocks as they close. Its slices are
  joined into one block (:func:`vhms.server.codec.join_blocks`) and its rows given back to the
  kernel. Sealing no longer stops ingest for ``K`` buckets of every series at once.
- **Decoded**: a write into a sealed block of a chunk (a late sample past the finest ring's
  horizon, a replica's catch-up, a backfill) decodes it once into ``[K, CHUNK]`` arrays that
  take every later write in place, encoded again within ``K`` advances, when more than a
  bound are open (the least recently written first: a catch-up goes a chunk of series at a
  time) or when the writer is done (:meth:`OpenBlocks.seal_all`).

A write into an open block drops the slices encoded so far. Reads take an open block's
arrays as they are. Counted in the store's ``stats``, per ring kind (``finest``, ``coarse``):
``<kind>_sealed_cells_written`` (cells written into closed blocks), ``<kind>_blocks_reopened``
(sealed blocks of a chunk decoded to take writes), ``<kind>_blocks_encoded``.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from typing import NamedTuple

import numpy as np

from vhms.server.codec import Block, encode_block, join_blocks
from vhms.server.decoded import DecodedBlocks
from vhms.server.rings import CHUNK, PlainRing, decode_values, encode_values

__all__ = ["SLICE", "Blocks", "Key", "OpenBlocks", "offsets_of", "offsets_stored"]

SLICE = 2048  # columns of an open block encoded at a time (a round's share of the work)
Blocks = dict[int, list[Block | None]]  # block number -> per chunk (None: empty)
Key = tuple[int, int]  # (block number, chunk)
Arrays = tuple[np.ndarray, np.ndarray | None]  # [K, m] stored bits, and sample times (a timed ring)


def offsets_stored(offsets: np.ndarray) -> np.ndarray:
    """Sample times (ms from the bucket's start) as the stored bits a block encodes (0: 0)."""
    return np.where(offsets != 0, encode_values(offsets.astype(np.float64)), np.uint64(0))


def offsets_of(stored: np.ndarray, dtype: type) -> np.ndarray:
    """The sample times of :func:`offsets_stored`'s bits."""
    values = decode_values(stored)
    values[stored == 0] = 0
    return values.astype(dtype)


class _Decoded(NamedTuple):
    bits: np.ndarray
    times: np.ndarray | None


class OpenBlocks:
    """The open blocks of a ring (see the module doc): its ``plain`` part, blocks of ``block``
    buckets, its sealed ``blocks`` and ``time_blocks`` (a timed ring), ``cache`` keys
    ``(±step_ms, number, chunk)``, at most ``bound`` decoded ones; with ``spread`` encoded a
    share per advance, else all at the advance after they open."""

    def __init__(
        self,
        plain: PlainRing,
        block: int,
        blocks: tuple[Blocks, Blocks | None],
        cache: tuple[DecodedBlocks, int],
        stats: tuple[Counter[str], str],
        bound: int,
        spread: bool,
    ) -> None:
        self.plain = plain
        self.block = block
        self.blocks, self.time_blocks = blocks
        self.cache, self.step_ms = cache
        self.stats, self.name = stats
        self.bound = bound
        self.spread = spread
        self.open: OrderedDict[Key, _Decoded | None] = OrderedDict()  # None: rows in the plain part
        self.partial: dict[Key, list[tuple[Block | None, Block | None]]] = {}  # slices encoded

    def __contains__(self, key: Key) -> bool:
        return key in self.open

    def __len__(self) -> int:
        return len(self.open)

    def close(self, number: int) -> None:
        """Block ``number`` has closed (the plain part not advanced yet): open it for each
        chunk with rows written. Its buckets past the plain part's head were never written:
        their slots hold older buckets', those still wanted encoded first, the others (past
        the retention) cleared."""
        self.seal_due((number + 1) * self.block - 1)
        fresh = np.arange(max(number * self.block, self.plain.head + 1), (number + 1) * self.block)
        self.plain.release(fresh % self.plain.slots, give_back=False)
        start = number * self.block % self.plain.slots
        for chunk, written in enumerate(self.plain.written):
            if written[start : start + self.block].any():
                self.open[(number, chunk)] = None

    def seal_due(self, newest: int) -> None:
        """Encode the open blocks whose plain rows an advance to ``newest`` recycles (by
        block: a block's slots may hold an older block's rows)."""
        for key in sorted(key for key, entry in self.open.items() if entry is None):
            if key[0] * self.block + self.plain.slots <= newest:
                self.seal(key)

    def forget_before(self, number: int) -> None:
        """Drop the open blocks below ``number`` (past the retention; rows in the plain part
        are recycled with their slots)."""
        for key in [key for key in self.open if key[0] < number]:
            del self.open[key]
            self.partial.pop(key, None)

    def share(self, newest: int) -> None:
        """After an advance to ``newest``: encode a share of the slices left, so that each open
        block is encoded by its deadline (one in the plain part before its slots are
        recycled; a decoded one within ``K`` advances)."""
        if not self.open:
            return
        dues = [key[0] * self.block + self.plain.slots - newest for key, e in self.open.items() if e is None]
        spare = max(min([*dues, self.block] if len(dues) < len(self.open) else dues), 1) if self.spread else 1
        work = -(-sum(self._slices(key) - len(self.partial.get(key, [])) for key in self.open) // spare)
        for key in self._order():
            done = self.partial.setdefault(key, [])
            for _ in range(min(work, self._slices(key) - len(done))):
                self._encode_slice(key)
                work -= 1
            if len(done) < self._slices(key):
                return
            self.seal(key)

    def _order(self) -> list[Key]:
        """The order open blocks are encoded in: those in the plain part by block, then the
        decoded ones least recently written first."""
        plain = sorted(key for key, entry in self.open.items() if entry is None)
        return [*plain, *(key for key, entry in self.open.items() if entry is not None)]

    def seal_all(self) -> None:
        """Encode every open block (a bulk writer done: a catch-up)."""
        for key in self._order():
            self.seal(key)

    def clear(self) -> None:
        self.open.clear()
        self.partial.clear()

    def _slices(self, key: Key) -> int:
        return -(-int(self.plain.values[key[1]].shape[1]) // SLICE)

    def _encode_slice(self, key: Key) -> None:
        """Encode the next slice of columns of an open block (values, times)."""
        bits, times = self.arrays(key)
        done = self.partial.setdefault(key, [])
        columns = slice(len(done) * SLICE, min((len(done) + 1) * SLICE, self.plain.values[key[1]].shape[1]))
        offsets = None if times is None else encoded(offsets_stored(times[:, columns]))
        done.append((encoded(bits[:, columns]), offsets))

    def seal(self, key: Key) -> None:
        """Encode an open block (the slices not encoded yet) and give its plain rows back."""
        number, chunk = key
        while len(self.partial.get(key, [])) < self._slices(key):
            self._encode_slice(key)
        done = self.partial.pop(key)
        width = self.plain.values[chunk].shape[1]
        for index, blocks in enumerate([self.blocks, self.time_blocks]):
            if blocks is not None:
                parts = [
                    (i * SLICE, block) for i, part in enumerate(done) if (block := part[index]) is not None
                ]
                put(blocks, key, join_blocks(parts, width) if parts else None)
        if self.open.pop(key) is None:
            start = number * self.block % self.plain.slots
            self.plain.release(np.arange(start, start + self.block), chunk=chunk)
        self.stats[f"{self.name}_blocks_encoded"] += 1

    def arrays(self, key: Key) -> Arrays:
        """An open block's ``[K, m]`` stored bits and sample times (a timed ring)."""
        entry = self.open[key]
        if entry is not None:
            return entry.bits, entry.times
        number, chunk = key
        start = number * self.block % self.plain.slots
        rows = slice(start, start + self.block)
        times = self.plain.times[chunk][rows] if self.plain.times is not None else None
        return self.plain.values[chunk][rows], times

    def opened(self, key: Key, rows: np.ndarray) -> Arrays:
        """:meth:`arrays` of a closed block of a chunk, to write ``rows`` of it (a sealed one
        decoded first; past the bound the least recently written decoded ones encoded)."""
        if key not in self.open:
            bits = np.zeros((self.block, CHUNK), dtype=np.uint64)
            _decode_into(self.blocks, key, bits)
            times = None
            if self.time_blocks is not None:
                stored = np.zeros((self.block, CHUNK), dtype=np.uint64)
                _decode_into(self.time_blocks, key, stored)
                times = offsets_of(stored, self.plain.time_dtype)
                self.cache.forget(-self.step_ms, *key)
            self.cache.forget(self.step_ms, *key)
            self.open[key] = _Decoded(bits, times)
            self.stats[f"{self.name}_blocks_reopened"] += 1
            decoded = [other for other, entry in self.open.items() if entry is not None and other != key]
            for other in decoded[: len(decoded) + 1 - self.bound]:
                self.seal(other)
        elif self.open[key] is not None:
            self.open.move_to_end(key)
        else:
            self.plain.written[key[1]][key[0] * self.block % self.plain.slots + rows] = True
        self.partial.pop(key, None)
        self.stats[f"{self.name}_sealed_cells_written"] += len(rows)
        return self.arrays(key)

    def decoded_bytes(self) -> int:
        """Bytes of the decoded blocks' values (the columns the plain part has room for)."""
        return sum(
            self.block * self.plain.values[chunk].shape[1] * 8
            for (_, chunk), entry in self.open.items()
            if entry is not None
        )


def encoded(stored: np.ndarray) -> Block | None:
    """``stored`` ``[K, m]`` encoded (None: nothing written)."""
    return encode_block(stored) if stored.any() else None


def put(blocks: Blocks, key: Key, block: Block | None) -> None:
    """Keep ``block`` as block ``key[0]`` of chunk ``key[1]``."""
    number, chunk = key
    chunks = blocks.setdefault(number, [])
    chunks.extend([None] * (chunk + 1 - len(chunks)))
    chunks[chunk] = block


def _decode_into(blocks: Blocks, key: Key, out: np.ndarray) -> None:
    """Block ``key[0]`` of chunk ``key[1]``'s stored bits into ``out`` ``[K, CHUNK]`` (zeros)."""
    chunks = blocks.get(key[0])
    block = chunks[key[1]] if chunks is not None and key[1] < len(chunks) else None
    if block is not None:
        out[:, : block.series] = block.decode(np.arange(block.series))
