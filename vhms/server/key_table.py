"""An open-addressing hash table from 64-bit series hashes to series ids, in numpy: what lets
the index find or create a batch of series with a few vectorised passes instead of a dict
operation per series (a dict of a million keys costs a cache miss or two per key, 200-300
ns, and a Python int object per id).

It stores hashes, not series: a hit says "the series of this id has this hash", which the
caller confirms against the series itself (``SeriesIndex`` compares the rows of codes). Two
series with the same hash cannot both be in the table; the caller keeps the second
elsewhere. Linear probing, at most half full (the table doubles beyond); hash 0 marks an
empty slot, so no hash given may be 0 (``symbols.row_hashes`` maps 0 to 1).
"""

from __future__ import annotations

import numpy as np

__all__ = ["KeyTable"]

_FIRST_SIZE = 1 << 12
_ONE_BY_ONE = 32  # keys left probing that go on one at a time: a vectorised round costs ~20 us


class KeyTable:
    def __init__(self) -> None:
        self.hashes = np.zeros(_FIRST_SIZE, dtype=np.int64)
        self.ids = np.zeros(_FIRST_SIZE, dtype=np.int32)
        self.count = 0

    @property
    def nbytes(self) -> int:
        return int(self.hashes.nbytes + self.ids.nbytes)

    def find(self, hashes: np.ndarray) -> np.ndarray:
        """The id stored under each hash, -1 where there is none."""
        out = np.full(len(hashes), -1, dtype=np.int64)
        mask = len(self.hashes) - 1
        todo, wanted, position = np.arange(len(hashes)), hashes, hashes & mask
        while len(todo) > _ONE_BY_ONE:
            found = self.hashes[position]
            hit = found == wanted
            out[todo[hit]] = self.ids[position[hit]]
            going_on = np.flatnonzero(~hit & (found != 0))
            todo, wanted, position = todo[going_on], wanted[going_on], (position[going_on] + 1) & mask
        table = self.hashes
        for key, want, at in zip(todo.tolist(), wanted.tolist(), position.tolist(), strict=True):
            while (found := int(table[at])) != want and found:
                at = (at + 1) & mask
            if found:
                out[key] = self.ids[at]
        return out

    def insert(self, hashes: np.ndarray, ids: np.ndarray) -> None:
        """Store ``ids`` under ``hashes`` (distinct, none in the table yet)."""
        if 2 * (self.count + len(hashes)) > len(self.hashes):
            self._grow(self.count + len(hashes))
        self._place(hashes, ids)
        self.count += len(hashes)

    def _place(self, hashes: np.ndarray, ids: np.ndarray) -> None:
        mask = len(self.hashes) - 1
        position = hashes & mask
        while len(hashes) > _ONE_BY_ONE:
            free = np.flatnonzero(self.hashes[position] == 0)
            # keys wanting the same free slot all write their hash there and one of them stays
            # (which one numpy does not say; the hashes are distinct, so reading the slots
            # back tells), its id then written; the rest probe on
            self.hashes[position[free]] = hashes[free]
            placed = np.zeros(len(hashes), dtype=bool)
            placed[free] = self.hashes[position[free]] == hashes[free]
            self.ids[position[placed]] = ids[placed]
            hashes, ids, position = hashes[~placed], ids[~placed], (position[~placed] + 1) & mask
        table = self.hashes
        for value, series, at in zip(hashes.tolist(), ids.tolist(), position.tolist(), strict=True):
            while table[at]:
                at = (at + 1) & mask
            table[at], self.ids[at] = value, series

    def _grow(self, count: int) -> None:
        size = len(self.hashes)
        while 2 * count > size:
            size *= 2
        used = self.hashes != 0
        hashes, ids = self.hashes[used], self.ids[used]
        self.hashes = np.zeros(size, dtype=np.int64)
        self.ids = np.zeros(size, dtype=np.int32)
        self._place(hashes, ids)
