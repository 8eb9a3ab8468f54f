"""A bounded cache of decoded sealed blocks, shared by a store's coarse rings.

A sealed block never changes (a late sample replaces it with a new one), and dashboards ask
the same hours again and again: a fetch reads each ``(ring, block, chunk)`` it needs through
this cache. An entry holds the decoded stored bits ``[K, m]`` (time-major, as a fetch copies
them) of the block's columns decoded so far, ascending, or of all of them: a fetch that asks
for a quarter of a chunk's columns or more decodes the whole chunk (one pass is cheaper
than many small ones, and a neighbouring selection then hits), a smaller one only the
columns it asks, merged into the entry. Entries are kept in least-recently-used order and
evicted past ``budget`` bytes of decoded values (an entry larger than the budget is not
kept). Owners :meth:`forget` a block when it leaves the retention or a late sample rewrites
it.

Counted in the store's ``stats``: ``decoded_cache_hits`` and ``decoded_cache_misses`` (a
lookup of one block of one chunk; a partial entry lacking some columns is a miss),
``decoded_cache_evictions`` and ``decoded_cache_invalidations`` (entries forgotten).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from typing import NamedTuple

import numpy as np

from vhms.server.codec import Block

__all__ = ["WHOLE_FRACTION", "DecodedBlocks"]

WHOLE_FRACTION = 4  # a fetch asking for 1/4 of a chunk's columns or more decodes all of them

Key = tuple[int, int, int]  # (the ring's step in ms, block number, chunk)


class _Entry(NamedTuple):
    columns: np.ndarray | None  # the decoded columns, ascending; None: all of the block's
    values: np.ndarray  # [K, len(columns) or block.series] stored bits


class DecodedBlocks:
    """Decoded blocks by ``(ring step, block number, chunk)``, at most ``budget`` bytes of
    them (see the module doc); ``stats`` is the store's counter."""

    def __init__(self, budget: int, stats: Counter[str]) -> None:
        if budget < 0:
            raise ValueError(f"a decoded-block cache needs a budget >= 0 bytes, got {budget}")
        self.budget = budget
        self.stats = stats
        self.bytes = 0
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def read(self, key: Key, block: Block, local: np.ndarray) -> np.ndarray:
        """The stored bits ``[K, len(local)]`` of ascending columns ``local`` of ``block``
        (those at or past its series empty), decoded or from the cache."""
        inside = int(np.searchsorted(local, block.series))
        want = local[:inside]
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            picked = _pick(entry, want)
            if picked is not None:
                self.stats["decoded_cache_hits"] += 1
                return _padded(picked, len(local))
        self.stats["decoded_cache_misses"] += 1
        entry = self._decoded(entry, block, want)
        self._keep(key, entry)
        picked = _pick(entry, want)
        assert picked is not None  # the entry holds every column asked now
        return _padded(picked, len(local))

    def forget(self, step_ms: int, number: int | None = None, chunk: int | None = None) -> None:
        """Drop the entries of a ring (``number`` None), of one of its blocks (``chunk`` None)
        or of one block of one chunk."""
        for key in [
            key
            for key in self._entries
            if key[0] == step_ms and number in (None, key[1]) and chunk in (None, key[2])
        ]:
            self.bytes -= self._entries.pop(key).values.nbytes
            self.stats["decoded_cache_invalidations"] += 1

    def _decoded(self, entry: _Entry | None, block: Block, want: np.ndarray) -> _Entry:
        """``entry`` (or a new one) grown by the columns of ``want`` it lacks."""
        held = np.zeros(0, dtype=np.int64) if entry is None or entry.columns is None else entry.columns
        if len(held) + len(want) >= block.series // WHOLE_FRACTION:
            return _Entry(None, block.decode(np.arange(block.series)))
        missing = want[~np.isin(want, held, assume_unique=True, kind="sort")] if len(held) else want
        columns = np.sort(np.concatenate([held, missing])) if len(held) else want
        values = np.empty((block.buckets, len(columns)), dtype=np.uint64)
        if entry is not None:
            values[:, np.searchsorted(columns, held)] = entry.values
        values[:, np.searchsorted(columns, missing)] = block.decode(missing)
        return _Entry(columns, values)

    def _keep(self, key: Key, entry: _Entry) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old.values.nbytes
        if entry.values.nbytes > self.budget:
            return
        self._entries[key] = entry
        self.bytes += entry.values.nbytes
        while self.bytes > self.budget:
            _, evicted = self._entries.popitem(last=False)
            self.bytes -= evicted.values.nbytes
            self.stats["decoded_cache_evictions"] += 1


def _pick(entry: _Entry, want: np.ndarray) -> np.ndarray | None:
    """The entry's values of columns ``want`` (a view where they are a run), or None if it
    lacks one of them."""
    if not len(want):
        return entry.values[:, :0]
    columns = entry.columns
    low, high = int(want[0]), int(want[-1])
    if high - low == len(want) - 1:  # a run: its ends found, and as many columns between them
        first = low if columns is None else int(np.searchsorted(columns, low))
        last = first + high - low
        if columns is not None and (last >= len(columns) or columns[first] != low or columns[last] != high):
            return None
        return entry.values[:, first : last + 1]
    if columns is None:
        return entry.values[:, want]
    positions = np.searchsorted(columns, want)
    if int(positions[-1]) >= len(columns) or not (columns[positions] == want).all():
        return None
    return entry.values[:, positions]


def _padded(values: np.ndarray, count: int) -> np.ndarray:
    """``values`` with empty columns appended up to ``count`` (series newer than the block)."""
    if values.shape[1] == count:
        return values
    out = np.zeros((values.shape[0], count), dtype=np.uint64)
    out[:, : values.shape[1]] = values
    return out
