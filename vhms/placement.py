"""Placement: which shard holds a series.

Consistent hashing of the series over the shard names: each shard puts ``virtual_nodes``
points on a 64-bit ring (BLAKE2b of ``"<shard>#<i>"``) and a series belongs to the first
point after its own hash (the platform's one series hash, ``bookkeeper.ground``: from a
batch's columns or from a canonical key, the same), wrapping around. Adding or removing a
shard moves only the series between its points and their predecessors (about ``1/shards``
of them); every writer and reader that knows the same shard names agrees on every series
without talking to the others.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from bookkeeper.ground import key_hashes, text_hashes

__all__ = ["HashRing"]


class HashRing:
    """The ring of ``shards`` (see the module doc)."""

    def __init__(self, shards: Iterable[str], virtual_nodes: int = 64) -> None:
        self.shards = sorted(set(shards))
        names = [shard for shard in self.shards for _ in range(virtual_nodes)]
        points = text_hashes([f"{shard}#{i}" for shard in self.shards for i in range(virtual_nodes)])
        order = np.argsort(points, kind="stable")
        self._points = points[order]
        self._owners = np.array(names, dtype=object)[order]

    def shard_of(self, key: str) -> str:
        """The shard of one series key; ``LookupError`` on an empty ring."""
        return str(self.shards_of(key_hashes([key]))[0])

    def shards_of(self, hashes: np.ndarray) -> np.ndarray:
        """The shard of each series hash (an object array); ``LookupError`` on an empty ring."""
        if not len(self._owners):
            raise LookupError("no live VHMS shard")
        at = np.searchsorted(self._points, hashes, side="right") % len(self._points)
        owners: np.ndarray = self._owners[at]
        return owners
