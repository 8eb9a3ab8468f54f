"""The series a selector picked, remembered: a dashboard asks the same selectors again and
again, and while the store holds the same series their answer cannot change.

An entry is a selector (its text, or a parsed :class:`~vhms.selector.Selector`), the ids
it picked and their label columns (compacted, as a fetch answers them), made when the index
held ``generation`` series. The index only grows (ids are dense and never reused, a
series' labels never change), so its number of series is a generation: an entry made at
another one is a miss, and is made again. A hit skips parsing the selector, matching it
against the postings (its regexes too) and reading the label columns: 10-15 us of a small
fetch's 80.

Bounded: at most ``max_entries`` entries, and ids in all up to ``max_series`` or the
number of series the store holds, whichever is more (an answer of more than a quarter of
that is never kept: such a fetch costs far more than its selection), the least recently
used evicted first. The bound grows with the store, so that what is kept is the same share
of it at any size (a store of a million series keeps a selection of its hundred thousand
gauges as one of a hundred thousand keeps that of its ten thousand), in memory a few
percent of the store's own (a kept series costs its id and its label codes, 20-40 bytes).
Thread-safe (one lock around the table).
Counted in the store's ``stats``: ``selection_cache_hits``, ``selection_cache_misses``,
``selection_cache_evictions``.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from typing import NamedTuple

import numpy as np

from bookkeeper.ground import LabelColumns
from vhms.selector import Selector

__all__ = ["Selection", "Selections"]

MAX_ENTRIES = 512
MAX_SERIES = 1 << 18


class Selection(NamedTuple):
    """What a selector picked: sorted ids and their label columns (shared: read, never
    change), at the index's ``generation``."""

    generation: int
    ids: np.ndarray
    labels: LabelColumns


class Selections:
    """Selections by selector (see the module doc); ``stats`` is the store's counter."""

    def __init__(
        self, stats: Counter[str], max_entries: int = MAX_ENTRIES, max_series: int = MAX_SERIES
    ) -> None:
        self.stats = stats
        self.max_entries = max_entries
        self.max_series = max_series
        self.series = 0  # ids held by the entries
        self._entries: OrderedDict[str | Selector, Selection] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, selector: str | Selector, generation: int) -> Selection | None:
        """The selection remembered for ``selector`` at ``generation``, else None."""
        with self._lock:
            found = self._entries.get(selector)
            if found is not None and found.generation == generation:
                self._entries.move_to_end(selector)
                self.stats["selection_cache_hits"] += 1
                return found
        self.stats["selection_cache_misses"] += 1
        return None

    def keep(self, selector: str | Selector, selection: Selection) -> bool:
        """Remember ``selection`` for ``selector`` (replacing an older one), within the bounds
        (its ``generation``: the store's series then); whether it is kept."""
        bound = max(self.max_series, selection.generation)
        size = len(selection.ids)
        if size > bound // 4:
            return False
        with self._lock:
            previous = self._entries.pop(selector, None)
            if previous is not None:
                self.series -= len(previous.ids)
            self._entries[selector] = selection
            self.series += size
            while len(self._entries) > self.max_entries or self.series > bound:
                _, evicted = self._entries.popitem(last=False)
                self.series -= len(evicted.ids)
                self.stats["selection_cache_evictions"] += 1
        return True
