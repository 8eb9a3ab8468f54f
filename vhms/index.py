"""The series index: series keys to ids, postings (series ids per name and per label
value) that answer a selector without looking at every series, and the labels of each
series by code, which give a query the labels of the series it fetched by columns.

A series is its canonical key ``name{k=v,...}`` (``bookkeeper.labels.format_series``);
ids are dense, in order of arrival, never reused. Postings are ``array('i')`` (4 bytes a
series and label), turned into sorted numpy arrays when a query reads them and cached
until the posting grows.

Labels by code: each value of a label (the name is the label ``__name__``) gets a code, in
order of first appearance. Series with the same label names share a shape; a shape keeps
the codes of its series as rows of an ``array('i')``, name first, then the labels in key
order. Per series: its shape and its row (4 bytes each), and 4 bytes per label and name.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable

import numpy as np

from bookkeeper.wire import parse_series
from vhms.exceptions import SeriesLimitError
from vhms.selector import Matcher, Selector

__all__ = ["NAME", "SeriesIndex"]

NAME = "__name__"  # the label that holds a series' name in label columns


class SeriesIndex:
    def __init__(self, max_series: int = 2_000_000) -> None:
        self.max_series = max_series
        self.keys: list[str] = []
        self._ids: dict[str, int] = {}
        self._postings: dict[str, dict[str, array[int]]] = {}  # label -> value -> ids
        self._cache: dict[tuple[str, str], tuple[int, np.ndarray]] = {}
        self._values: dict[str, list[str]] = {}  # label -> its values, by code
        self._codes: dict[str, dict[str, int]] = {}  # label -> value -> code
        self._shapes: list[tuple[str, ...]] = []  # shape -> (__name__, its labels...)
        self._shape_numbers: dict[tuple[str, ...], int] = {}
        self._shape_rows: list[array[int]] = []  # shape -> codes of its series, row after row
        self._shape_of = array("i")  # series id -> shape
        self._row_of = array("i")  # series id -> row in its shape
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
        self._post(NAME, name, series_id)
        for label, value in labels.items():
            self._post(label, value, series_id)
        self._add_codes(name, labels)
        return series_id

    def _add_codes(self, name: str, labels: dict[str, str]) -> None:
        shape = (NAME, *labels)
        number = self._shape_numbers.get(shape)
        if number is None:
            number = self._shape_numbers[shape] = len(self._shapes)
            self._shapes.append(shape)
            self._shape_rows.append(array("i"))
        rows = self._shape_rows[number]
        self._shape_of.append(number)
        self._row_of.append(len(rows) // len(shape))
        for label, value in ((NAME, name), *labels.items()):
            codes = self._codes.get(label)
            if codes is None:
                codes, self._values[label] = self._codes.setdefault(label, {}), []
            code = codes.get(value)
            if code is None:
                code = codes[value] = len(codes)
                self._values[label].append(value)
            rows.append(code)

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
        return sorted(label for label in self._postings if label != NAME)

    def label_values(self, label: str) -> list[str]:
        return sorted(self._postings.get(label, {}))

    def columns(self, ids: np.ndarray) -> dict[str, tuple[list[str], np.ndarray]]:
        """The names (``"__name__"``) and labels of series ``ids`` by columns: per label, its
        values by code (a list that only grows: read it, never change it) and an int32 code
        per series, -1 where the series lacks the label."""
        out: dict[str, tuple[list[str], np.ndarray]] = {}
        with self._lock:  # no array may be resized while numpy reads its buffer
            shape_of = np.frombuffer(self._shape_of, dtype=np.int32)[ids]
            row_of = np.frombuffer(self._row_of, dtype=np.int32)[ids]
            for number in np.unique(shape_of).tolist():
                shape = self._shapes[number]
                members = np.flatnonzero(shape_of == number)
                rows = np.frombuffer(self._shape_rows[number], dtype=np.int32).reshape(-1, len(shape))
                codes = rows[row_of[members]]
                del rows  # release the buffer before the lock
                for position, label in enumerate(shape):
                    if label not in out:
                        out[label] = (self._values[label], np.full(len(ids), -1, dtype=np.int32))
                    out[label][1][members] = codes[:, position]
        return out

    def _posting(self, label: str, value: str) -> np.ndarray:
        posting = self._postings[label][value]
        cached = self._cache.get((label, value))
        if cached is not None and cached[0] == len(posting):
            return cached[1]
        with self._lock:  # an append (a new series) must not meet a buffer numpy is reading
            ids = np.frombuffer(posting, dtype=np.int32).copy()  # appended in id order: sorted
        self._cache[(label, value)] = (len(posting), ids)
        return ids

    def _having(self, matcher: Matcher, check: Callable[[], None] | None) -> np.ndarray:
        """Sorted ids of series whose label satisfies a positive matcher (``=`` or ``~``);
        ``check`` is called while a regex runs through the label's values."""
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

    def match(self, selector: Selector, check: Callable[[], None] | None = None) -> np.ndarray:
        """Sorted ids of the series ``selector`` picks; ``check`` is called between slices of
        the regexes' work (whatever it raises stops the selection)."""
        matchers = [m for m in (selector.name, *selector.matchers) if m is not None]
        positive = [m for m in matchers if m.op in ("=", "~")]
        negative = [m for m in matchers if m.op in ("!=", "!~")]
        total = len(self.keys)
        if positive:
            sets = sorted((self._having(m, check) for m in positive), key=len)
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
            excluded = self._having(positive_form, check)
            if len(excluded):
                mask = np.zeros(total, dtype=bool)
                mask[excluded] = True
                result = result[~mask[result]]
        return result.astype(np.int64, copy=False)


_EMPTY = np.zeros(0, dtype=np.int32)
