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
        todo = np.arange(len(hashes))
        position = hashes & mask
        while len(todo):
            found = self.hashes[position]
            hit = found == hashes[todo]
            out[todo[hit]] = self.ids[position[hit]]
            going_on = ~hit & (found != 0)
            todo = todo[going_on]
            position = (position[going_on] + 1) & mask
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
        todo = np.arange(len(hashes))
        while len(todo):
            free = self.hashes[position] == 0
            # keys wanting the same free slot all write their hash there and one of them stays
            # (which one numpy does not say; the hashes are distinct, so reading the slots
            # back tells), its id then written; the rest probe on
            self.hashes[position[free]] = hashes[todo[free]]
            placed = free & (self.hashes[position] == hashes[todo])
            self.ids[position[placed]] = ids[todo[placed]]
            todo = todo[~placed]
            position = (position[~placed] + 1) & mask

    def _grow(self, count: int) -> None:
        size = len(self.hashes)
        while 2 * count > size:
            size *= 2
        used = self.hashes != 0
        hashes, ids = self.hashes[used], self.ids[used]
        self.hashes = np.zeros(size, dtype=np.int64)
        self.ids = np.zeros(size, dtype=np.int32)
        self._place(hashes, ids)
