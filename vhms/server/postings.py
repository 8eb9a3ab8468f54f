"""Postings: the ids of the series that have each name and each label value, what answers a
selector without looking at every series.

A posting is an ``array('i')`` of ascending ids (series get ids in order of arrival, and are
appended in that order), turned into a sorted numpy array when a query reads it and cached
until the posting grows. New series are not appended a batch at a time: their ids and codes
wait, per label, as one chunk per batch, until ``WAIT_AT_MOST`` series wait or a reader
comes; then they are grouped at once, per label by a radix sort of the codes
(``new_rows.grouping_order``), a run of ascending ids per posting. A first round of a
million series thus groups a label's codes a few times rather than once per batch, and
visits each of its values as often.

Thread safety: writers (:meth:`Postings.add`) hold the index's lock; readers take it to
group what waits and to copy a posting, never while a regex runs through a label's values.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable

import numpy as np

from vhms.selector import Matcher
from vhms.server.new_rows import grouping_order

__all__ = ["WAIT_AT_MOST", "Postings"]

WAIT_AT_MOST = 1 << 17  # new series whose postings wait to be grouped together, at most
_EMPTY = np.zeros(0, dtype=np.int32)


class Postings:
    """Postings by label and value; ``values`` gives each label's values by code (the
    index's, only ever appended to), ``lock`` is the index's; at most ``wait_at_most`` new
    series wait to be posted."""

    def __init__(
        self, values: dict[str, list[str]], lock: threading.Lock, wait_at_most: int = WAIT_AT_MOST
    ) -> None:
        self._values = values
        self._lock = lock
        self.wait_at_most = wait_at_most
        self._postings: dict[str, dict[str, array[int]]] = {}  # label -> value -> ids
        self._waiting: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}  # label -> chunks: ids, codes
        self._waiting_series = 0
        self._cache: dict[tuple[str, str], tuple[int, np.ndarray]] = {}

    def add(self, chunks: dict[str, tuple[np.ndarray, np.ndarray]], series: int) -> None:
        """Post ``series`` new series given per label by their ids (int32, ascending, above
        every id posted before) and codes (with the lock held)."""
        for label, chunk in chunks.items():
            if len(chunk[0]):
                self._waiting.setdefault(label, []).append(chunk)
        self._waiting_series += series
        if self._waiting_series >= self.wait_at_most:
            self._group_waiting()

    def settle(self) -> None:
        """Post what waits: what a reader does first."""
        if self._waiting:
            with self._lock:
                self._group_waiting()

    def _group_waiting(self) -> None:
        for label, chunks in self._waiting.items():
            owners = np.concatenate([chunk[0] for chunk in chunks])
            codes = np.concatenate([chunk[1] for chunk in chunks])
            order = grouping_order(codes)
            codes = codes[order]
            edges = [0, *(np.flatnonzero(np.diff(codes)) + 1).tolist(), len(codes)]
            data = memoryview(owners[order].tobytes())
            values = self._values[label]
            postings = self._postings.setdefault(label, {})
            for code, start, stop in zip(codes[edges[:-1]].tolist(), edges[:-1], edges[1:], strict=True):
                posting = postings.get(values[code])
                if posting is None:
                    posting = postings[values[code]] = array("i")
                posting.frombytes(data[4 * start : 4 * stop])
        self._waiting = {}
        self._waiting_series = 0

    def labels(self) -> list[str]:
        """Every label posted, the name's among them."""
        self.settle()
        return list(self._postings)

    def values(self, label: str) -> list[str]:
        """The values of ``label`` posted."""
        self.settle()
        return list(self._postings.get(label, {}))

    def having(self, matcher: Matcher, check: Callable[[], None] | None) -> np.ndarray:
        """Sorted ids (int32) of series whose label satisfies a positive matcher (``=`` or
        ``~``); ``check`` is called while a regex runs through the label's values."""
        self.settle()
        values = self._postings.get(matcher.label, {})
        if matcher.op == "=":
            return self._posting(matcher.label, matcher.value) if matcher.value in values else _EMPTY
        # a copy of the keys: a new series may add a value while the regex runs (no lock held)
        candidates = list(values)
        hits = matcher.matching(candidates, check)
        chosen = [self._posting(matcher.label, candidates[i]) for i in np.flatnonzero(hits).tolist()]
        if not chosen:
            return _EMPTY
        return chosen[0] if len(chosen) == 1 else np.sort(np.concatenate(chosen))

    def _posting(self, label: str, value: str) -> np.ndarray:
        posting = self._postings[label][value]
        cached = self._cache.get((label, value))
        if cached is not None and cached[0] == len(posting):
            return cached[1]
        with self._lock:  # an append (a new series) must not meet a buffer numpy is reading
            ids = np.frombuffer(posting, dtype=np.int32).copy()  # appended in id order: sorted
        self._cache[(label, value)] = (len(posting), ids)
        return ids
