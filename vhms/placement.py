"""Placement: which shard holds a series.

Consistent hashing of the series key over the shard names: each shard puts
``virtual_nodes`` points on a 64-bit ring (BLAKE2b of ``"<shard>#<i>"``) and a series
belongs to the first point at or after its own hash (BLAKE2b of its canonical key),
wrapping around. Adding or removing a shard moves only the series between its points and
their predecessors (about ``1/shards`` of them); every writer and reader that knows the
same shard names agrees on every series without talking to the others.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable

__all__ = ["HashRing"]


def _point(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class HashRing:
    """The ring of ``shards`` (see the module doc)."""

    def __init__(self, shards: Iterable[str], virtual_nodes: int = 64) -> None:
        self.shards = sorted(set(shards))
        points = sorted(
            (_point(f"{shard}#{i}"), shard) for shard in self.shards for i in range(virtual_nodes)
        )
        self._hashes = [p for p, _ in points]
        self._owners = [s for _, s in points]

    def shard_of(self, key: str) -> str:
        """The shard of one series key; ``LookupError`` on an empty ring."""
        if not self._owners:
            raise LookupError("no live VHMS shard")
        return self._owners[bisect.bisect(self._hashes, _point(key)) % len(self._hashes)]
