"""A coarse ring: its open buckets plain, its closed ones compressed a block at a time
(:mod:`vhms.server.sealed`).

A coarse bucket is **closed** once every finest bucket inside it has left the finest ring:
ingest can no longer recompute it, only merge a sample older than the finest ring into it
(``last`` of an empty bucket, ``min``, ``max``), which is rare. The plain part is a ring of
``ceil(finest slots / ratio) + K + 2`` slots: enough for the open buckets and the closed ones
of an unsealed block, so a slot is never recycled before its bucket is sealed.
"""

from __future__ import annotations

from vhms.resolutions import Resolution
from vhms.server.decoded import DecodedBlocks
from vhms.server.finest import FinestRing
from vhms.server.sealed import MAX_BLOCK, SealedRing

__all__ = ["CoarseRing"]


class CoarseRing(SealedRing):
    """A coarse resolution's buckets (see the module doc), rolled up from ``finest``."""

    def __init__(self, resolution: Resolution, finest: FinestRing, cache: DecodedBlocks) -> None:
        self.finest = finest
        self.ratio = resolution.step_ms // finest.step_ms
        block = max(1, min(resolution.slots // 4, MAX_BLOCK))
        plain_slots = -(-finest.slots // self.ratio) + block + 2
        super().__init__(resolution, plain_slots, block, cache, timed=False, name="coarse")

    def closed(self, newest: int) -> int:
        """The newest bucket none of whose finest buckets the finest ring still holds (the
        finest ring has moved first)."""
        finest = self.finest
        return (finest.head - finest.slots + 1) // self.ratio - 1
