"""The series index: series keys to ids, and postings (series ids per name and per label
value) that answer a selector without looking at every series.

A series is its canonical key ``name{k=v,...}`` (``bookkeeper.labels.format_series``);
ids are dense, in order of arrival, never reused. Postings are ``array('i')`` (4 bytes a
series and label), turned into sorted numpy arrays when a query reads them and cached
until the posting grows.
"""

from __future__ import annotations

import threading
from array import array

import numpy as np

from bookkeeper.labels import parse_series
from vhms.exceptions import SeriesLimitError
from vhms.selector import Matcher, Selector

__all__ = ["SeriesIndex"]

_NAME = "__name__"


class SeriesIndex:
    def __init__(self, max_series: int = 2_000_000) -> None:
        self.max_series = max_series
        self.keys: list[str] = []
        self._ids: dict[str, int] = {}
        self._postings: dict[str, dict[str, array[int]]] = {}  # label -> value -> ids
        self._cache: dict[tuple[str, str], tuple[int, np.ndarray]] = {}
        self._lock = threading.Lock()
        self.refused = 0  # new series refused by max_series

    def __len__(self) -> int:
        return len(self.keys)

    def lookup(self, keys: list[str]) -> np.ndarray:
        """Ids of ``keys``, creating new series; ``-1`` where ``max_series`` refused one."""
        get = self._ids.get
        ids = [get(key, -1) for key in keys]
        if -1 in ids:
            with self._lock:
                for position, key in enumerate(keys):
                    if ids[position] == -1:
                        ids[position] = self._add(key)
        return np.array(ids, dtype=np.int64)

    def _add(self, key: str) -> int:
        existing = self._ids.get(key)
        if existing is not None:
            return existing
        if len(self.keys) >= self.max_series:
            self.refused += 1
            return -1
        name, labels = parse_series(key)
        series_id = len(self.keys)
        self.keys.append(key)
        self._ids[key] = series_id
        self._post(_NAME, name, series_id)
        for label, value in labels.items():
            self._post(label, value, series_id)
        return series_id

    def _post(self, label: str, value: str, series_id: int) -> None:
        values = self._postings.get(label)
        if values is None:
            values = self._postings[label] = {}
        posting = values.get(value)
        if posting is None:
            posting = values[value] = array("i")
        posting.append(series_id)

    def require(self, key: str) -> int:
        """The id of ``key``, created if new; ``SeriesLimitError`` when refused."""
        series_id = int(self.lookup([key])[0])
        if series_id < 0:
            raise SeriesLimitError(f"the store holds max_series={self.max_series} series; {key} refused")
        return series_id

    def labels(self, series_id: int) -> tuple[str, dict[str, str]]:
        return parse_series(self.keys[series_id])

    def label_names(self) -> list[str]:
        return sorted(label for label in self._postings if label != _NAME)

    def label_values(self, label: str) -> list[str]:
        return sorted(self._postings.get(label, {}))

    def _posting(self, label: str, value: str) -> np.ndarray:
        posting = self._postings[label][value]
        cached = self._cache.get((label, value))
        if cached is not None and cached[0] == len(posting):
            return cached[1]
        ids = np.frombuffer(posting, dtype=np.int32).copy()  # appended in id order: sorted
        self._cache[(label, value)] = (len(posting), ids)
        return ids

    def _having(self, matcher: Matcher) -> np.ndarray:
        """Sorted ids of series whose label satisfies a positive matcher (``=`` or ``~``)."""
        values = self._postings.get(matcher.label, {})
        if matcher.op == "=":
            return self._posting(matcher.label, matcher.value) if matcher.value in values else _EMPTY
        chosen = [self._posting(matcher.label, v) for v in values if matcher.matches(v)]
        if not chosen:
            return _EMPTY
        return chosen[0] if len(chosen) == 1 else np.sort(np.concatenate(chosen))

    def match(self, selector: Selector) -> np.ndarray:
        """Sorted ids of the series ``selector`` picks."""
        matchers = [m for m in (selector.name, *selector.matchers) if m is not None]
        positive = [m for m in matchers if m.op in ("=", "~")]
        negative = [m for m in matchers if m.op in ("!=", "!~")]
        total = len(self.keys)
        if positive:
            sets = sorted((self._having(m) for m in positive), key=len)
            result = sets[0]
            for other in sets[1:]:
                if not len(result):
                    break
                mask = np.zeros(total, dtype=bool)
                mask[other] = True
                result = result[mask[result]]
        else:
            result = np.arange(total, dtype=np.int32)
        for matcher in negative:
            if not len(result):
                break
            # "!=" and "!~" drop the series whose label is set and matches the positive form
            positive_form = Matcher(
                matcher.label, "=" if matcher.op == "!=" else "~", matcher.value, matcher.regex
            )
            excluded = self._having(positive_form)
            if len(excluded):
                mask = np.zeros(total, dtype=bool)
                mask[excluded] = True
                result = result[~mask[result]]
        return result.astype(np.int64, copy=False)


_EMPTY = np.zeros(0, dtype=np.int32)
