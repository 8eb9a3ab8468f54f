"""Series identity by columns: the names and label sets of S series as integer codes.

A :class:`SeriesTable` holds a ``bookkeeper.ground.LabelColumn`` (the one label-column type
of the platform) for the names and one per label name. A
column is a list of distinct values and an int32 code per series into it, ``-1`` where the
series lacks the label (names are never absent). Equal codes in one column mean equal
values; codes of two tables are compared through their values (:func:`joint_classes`).

Equivalence classes, matching and the shared labels of a ``reduce`` are numpy over these
codes, so a query never builds a label dict per series; the dicts (``label_dicts``) are
made only when someone asks for them. Tables are immutable: operations return new tables
that share the value lists.

Built from the label columns a VHMS fetch answers (the store's own codes, compacted), or
from Python lists.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from bookkeeper.ground import LabelColumn, dense_classes, row_keys, translate
from vhms import NAME, FetchResult

__all__ = ["SeriesTable", "class_order", "joint_classes", "kept_for", "remembered"]

T = TypeVar("T")


def _constant(value: str, size: int) -> LabelColumn:
    return LabelColumn([value], np.zeros(size, dtype=np.int32))


def _encode(values: Iterable[str]) -> LabelColumn:
    index: dict[str, int] = {}
    codes = [index.setdefault(value, len(index)) for value in values]
    return LabelColumn(list(index), np.array(codes, dtype=np.int32))


MEMO_MAX = 256  # what one table remembers of a kind (its groupings, its matchings), at most


def kept_for(table: SeriesTable, series: int, other: int = 0) -> int:
    """How many of a kind a table remembers (:meth:`SeriesTable.derived` dicts): ``series``
    series' worth of entries the size of the table (and ``other`` series more), 8 at least,
    :data:`MEMO_MAX` at most: a dashboard's every grouping of a small table, a few of a large
    one's."""
    return min(MEMO_MAX, max(8, series // max(len(table) + other, 1)))


def remembered(table: SeriesTable, what: str, key: Hashable, series: int, make: Callable[[], T]) -> T:
    """``make()`` for ``key``, made once and kept with ``table`` among its ``what``
    (:meth:`SeriesTable.derived`), :func:`kept_for` ``series`` of them: past that they are
    cleared whole (threads share them), and the newest kept."""
    kept: dict[Hashable, T] = table.derived(what, lambda _: {})
    found = kept.get(key)
    if found is None:
        if len(kept) >= kept_for(table, series):
            kept.clear()
        found = kept[key] = make()
    return found


class SeriesTable:
    """Names and labels of series by columns (see the module doc); ``columns`` is in label
    order and may hold labels that no series of this table has."""

    __slots__ = ("_derived", "_dicts", "columns", "names")

    def __init__(self, names: LabelColumn, columns: Mapping[str, LabelColumn]) -> None:
        self.names = names
        self.columns = {label: columns[label] for label in sorted(columns)}
        self._dicts: list[dict[str, str]] | None = None
        self._derived: dict[str, Any] | None = None

    def derived(self, what: str, make: Callable[[SeriesTable], T]) -> T:
        """``make(self)``, made once per table and kept with it (a table never changes; a
        fetch's is reused while its selector picks the same series): what a reader derives
        from the labels alone, e.g. an answer's label texts or Prometheus's order of the
        rows. ``what`` names it; what it gives is shared, so never to be changed."""
        if self._derived is None:
            self._derived = {}
        found = self._derived.get(what)
        if found is None:
            found = self._derived[what] = make(self)
        return found

    def __len__(self) -> int:
        return len(self.names.codes)

    # -- building ----------------------------------------------------------------------------

    @classmethod
    def from_lists(cls, names: Sequence[str], labels: Sequence[Mapping[str, str]]) -> SeriesTable:
        """From a name and a label dict per series."""
        rows: dict[str, list[int]] = {}
        codes: dict[str, list[int]] = {}
        index: dict[str, dict[str, int]] = {}
        for row, label_set in enumerate(labels):
            for label, value in label_set.items():
                known = index.get(label)
                if known is None:
                    known, rows[label], codes[label] = index.setdefault(label, {}), [], []
                rows[label].append(row)
                codes[label].append(known.setdefault(value, len(known)))
        columns = {}
        for label, known in index.items():
            column = LabelColumn.absent(len(labels)).codes
            column[rows[label]] = codes[label]
            columns[label] = LabelColumn(list(known), column)
        return cls(_encode(names), columns)

    @classmethod
    def from_fetch(cls, result: FetchResult) -> SeriesTable:
        """The series of a fetch, from the label columns it carries."""
        labels = dict(result.labels)
        names = labels.pop(NAME, None)
        if names is None:  # no series
            return cls(LabelColumn([], np.zeros(0, dtype=np.int32)), {})
        return cls(LabelColumn(*names), {label: LabelColumn(*column) for label, column in labels.items()})

    # -- reading -----------------------------------------------------------------------------

    def name_list(self) -> list[str]:
        values = self.names.values
        return [values[code] for code in self.names.codes.tolist()]

    def label_dicts(self) -> list[dict[str, str]]:
        """One label dict per series (made once per table; shared, so never to be changed)."""
        if self._dicts is None:
            labels = list(self.columns)
            if not labels:
                self._dicts = [{} for _ in range(len(self))]
            else:
                per_row = zip(*(column.objects().tolist() for column in self.columns.values()), strict=True)
                self._dicts = [
                    {label: value for label, value in zip(labels, row, strict=True) if value is not None}
                    for row in per_row
                ]
        return self._dicts

    def label_names(self) -> list[str]:
        """The labels at least one series has, sorted."""
        return [label for label, column in self.columns.items() if (column.codes >= 0).any()]

    def describe(self, row: int, labels: Iterable[str]) -> str:
        """``{k=v,...}``: the given labels of one series (those it has), sorted."""
        pairs = []
        for label in sorted(labels):
            column = self.columns.get(label)
            if column is not None and column.codes[row] >= 0:
                pairs.append(f"{label}={column.values[column.codes[row]]}")
        return "{" + ",".join(pairs) + "}"

    # -- deriving ----------------------------------------------------------------------------

    def take(self, rows: np.ndarray | Sequence[int]) -> SeriesTable:
        index = np.asarray(rows, dtype=np.int64)
        return SeriesTable(self.names.take(index), {k: c.take(index) for k, c in self.columns.items()})

    def with_name(self, name: str) -> SeriesTable:
        """Every series named ``name`` (made once per table and name: a function's answer over
        a selector's table keeps what was derived from it, its order, its label texts)."""
        return self.derived(
            "with_name:" + name, lambda table: SeriesTable(_constant(name, len(table)), table.columns)
        )

    def with_names(self, names: Sequence[str]) -> SeriesTable:
        if len(names) != len(self):
            raise ValueError(f"{len(names)} names for {len(self)} series")
        return SeriesTable(_encode(names), self.columns)

    def restrict(self, keep: Iterable[str] | None = None, drop: Iterable[str] = ()) -> SeriesTable:
        """Only the labels in ``keep`` (all when None), less those in ``drop``."""
        chosen = set(self.columns if keep is None else keep) - set(drop)
        return SeriesTable(self.names, {k: c for k, c in self.columns.items() if k in chosen})

    def concat(self, other: SeriesTable) -> SeriesTable:
        names_a, names_b = translate(self.names, other.names)
        columns = {}
        for label in set(self.columns) | set(other.columns):
            left = self.columns.get(label, LabelColumn.absent(len(self)))
            right = other.columns.get(label, LabelColumn.absent(len(other)))
            values, right_codes = translate(left, right)
            columns[label] = LabelColumn(values, np.concatenate([left.codes, right_codes]))
        return SeriesTable(LabelColumn(names_a, np.concatenate([self.names.codes, names_b])), columns)

    def groups(self, labels: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Classes of series equal on ``labels`` (a missing label is a value of its own):
        the class of each series (0, 1, ... in order of first appearance) and each class's
        first series."""
        return dense_classes(self.class_keys(labels))

    def class_keys(self, labels: Sequence[str]) -> np.ndarray:
        """An int64 per series, equal exactly when the series agree on ``labels``."""
        present = [self.columns[label] for label in labels if label in self.columns]
        return row_keys(present, len(self))

    def shared(self, order: np.ndarray, starts: np.ndarray) -> SeriesTable:
        """One row per class: the name all its members share ("" otherwise) and the labels
        they all have with one value; ``order`` and ``starts`` as :func:`class_order` gives."""
        count = len(starts)
        names = _agree(self.names.codes, order, starts, count)
        name_values = self.names.values
        if (names < 0).any():
            blank = name_values.index("") if "" in name_values else len(name_values)
            name_values = name_values if blank < len(name_values) else [*name_values, ""]
            names = np.where(names < 0, blank, names).astype(np.int32)
        columns = {
            k: LabelColumn(c.values, _agree(c.codes, order, starts, count)).compact()
            for k, c in self.columns.items()
        }
        return SeriesTable(LabelColumn(name_values, names).compact(), columns)


def _agree(codes: np.ndarray, order: np.ndarray, starts: np.ndarray, count: int) -> np.ndarray:
    """Per class, the code all its members have, else -1."""
    if not count:
        return np.zeros(0, dtype=np.int32)
    ordered = codes[order]
    low = np.minimum.reduceat(ordered, starts)
    high = np.maximum.reduceat(ordered, starts)
    return np.where(low == high, low, -1).astype(np.int32)


def class_order(classes: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The series sorted by class (stable) and where each of the ``count`` classes begins."""
    order = np.argsort(classes, kind="stable")
    return order, np.searchsorted(classes[order], np.arange(count))


def joint_classes(a: SeriesTable, b: SeriesTable, labels: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Class numbers of the series of two tables, by ``labels``, in one numbering: equal
    exactly when the series agree on those labels (first appearance in ``a`` then ``b``).
    Of one table with itself (both sides of ``x / on(...) x``), its own classes on each side:
    what the two tables' rows one after the other would number, at half the sort."""
    if a is b:
        classes = a.groups(labels)[0]
        return classes, classes
    columns = []
    for label in labels:
        left = a.columns.get(label, LabelColumn.absent(len(a)))
        right = b.columns.get(label, LabelColumn.absent(len(b)))
        values, right_codes = translate(left, right)
        columns.append(LabelColumn(values, np.concatenate([left.codes, right_codes])))
    joint = dense_classes(row_keys(columns, len(a) + len(b)))[0]
    return joint[: len(a)], joint[len(a) :]
