"""Label sets as PromQL writes them: an empty value is no label, and Prometheus's order of
series (by their sorted label pairs, the name among them)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from query_dsl.exceptions import MatchingError
from query_dsl.matrix import Matrix
from query_dsl.promql.ast import Expr, MatrixSelector, Paren, VectorSelector
from query_dsl.series_table import SeriesTable

__all__ = ["absent_labels", "absent_table", "ensure_unique", "prometheus_order", "sort_key", "with_label"]


def with_label(labels: dict[str, str], label: str, value: str) -> dict[str, str]:
    """``labels`` with ``label`` set to ``value``, or removed when ``value`` is empty."""
    out = dict(labels)
    if value:
        out[label] = value
    else:
        out.pop(label, None)
    return out


def sort_key(labels: dict[str, str]) -> list[tuple[str, str]]:
    """Prometheus's order of label sets: compare their sorted (name, value) pairs."""
    return sorted(labels.items())


def ensure_unique(m: Matrix, message: str = "vector cannot contain metrics with the same labelset") -> None:
    """``MatchingError`` when two series with the same name and labels have a value at the
    same evaluation time (Prometheus's check of every function's and operator's output)."""
    if len(m) < 2:
        return
    order, same = m.table.derived("label_set_twins", _twins)
    if not len(same):
        return
    present = ~np.isnan(m.values)
    for index in same.tolist():
        if (present[order[index]] & present[order[index + 1]]).any():
            raise MatchingError(message)


def _twins(table: SeriesTable) -> tuple[np.ndarray, np.ndarray]:
    """The series sorted by label set (name too), and where one's is the next one's: made
    once per table (a function's answer over a selector's is reused)."""
    keys = table.class_keys(list(table.columns))
    combined = keys * (len(table.names.values) + 1) + table.names.codes.astype(np.int64)
    order = np.argsort(combined, kind="stable")
    return order, np.flatnonzero(combined[order][1:] == combined[order][:-1])


_FEW = (
    64  # up to this many series, keys as Python tuples cost less than numpy's ranks (7 us against 27 for 12)
)


def _few_in_order(ranked: dict[str, tuple[list[str], np.ndarray]], count: int) -> np.ndarray:
    """``prometheus_order``'s rows by a key per series: each label's (value, code), labels in
    sorted order; the code orders equal values as a stable ranking of the values does."""
    columns = [(ranked[label][0], ranked[label][1].tolist()) for label in sorted(ranked)]
    keys = [tuple((values[codes[row]], codes[row]) for values, codes in columns) for row in range(count)]
    return np.array(sorted(range(count), key=keys.__getitem__), dtype=np.int64)


def prometheus_order(m: Matrix) -> np.ndarray:
    """The rows of ``m`` in Prometheus's order of label sets (:func:`sort_key`, the name as
    ``__name__``): by columns of value ranks when every series has the same labels (the
    usual case: no label dict per series), else one key per series. Made once per table
    (a selector's is reused while it picks the same series): read-only."""
    return m.table.derived("prometheus_order", _table_order)


def _table_order(table: SeriesTable) -> np.ndarray:
    order = _ordered(table)
    order.flags.writeable = False
    return order


def _ordered(table: SeriesTable) -> np.ndarray:
    count = len(table)
    if count < 2:
        return np.arange(count)
    columns = {label: column for label, column in table.columns.items() if (column.codes >= 0).any()}
    nameless = np.array([value == "" for value in table.names.values] + [True])[table.names.codes]
    named = not nameless.any()
    uniform = (named or nameless.all()) and all((column.codes >= 0).all() for column in columns.values())
    if not uniform:
        keys = [
            sort_key({"__name__": name, **labels} if name else labels)
            for name, labels in zip(table.name_list(), table.label_dicts(), strict=True)
        ]
        return np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)
    ranked = {"__name__": (table.names.values, table.names.codes)} if named and count else {}
    ranked.update({label: (column.values, column.codes) for label, column in columns.items()})
    if count <= _FEW:
        return _few_in_order(ranked, count)
    digits: list[tuple[np.ndarray, int]] = []
    span = 1
    for label in sorted(ranked):
        values, codes = ranked[label]
        used = np.flatnonzero(np.bincount(codes, minlength=len(values)))  # a fetch's may hold more
        if len(used) > 1:  # a label every series shares orders nothing
            rank = np.empty(len(values), dtype=np.int64)
            rank[used[np.argsort(np.asarray([values[code] for code in used.tolist()], dtype=object))]] = (
                np.arange(len(used))
            )
            digits.append((rank[codes], len(used)))
            span *= len(used)
    if not digits:
        return np.arange(count)
    if span >= 1 << 63:
        return np.lexsort([key for key, _ in digits[::-1]])
    # the ranks as the digits of one number, sorted stably: lexsort's order, a third of its time at 1M rows
    combined = np.zeros(count, dtype=np.int64)
    for key, size in digits:
        combined *= size
        combined += key
    return np.argsort(combined, kind="stable")


@lru_cache(maxsize=256)  # one table per argument: a dashboard's absent() finds its texts made
def absent_table(arg: Expr) -> SeriesTable:
    """The one series of ``absent(arg)``, without a name (:func:`absent_labels`)."""
    return SeriesTable.from_lists([""], [absent_labels(arg)])


def absent_labels(arg: Expr) -> dict[str, str]:
    """The labels of ``absent(arg)``'s series: those of ``arg``'s selector that one ``=``
    matcher alone sets (none but the name's for another expression)."""
    while isinstance(arg, Paren):
        arg = arg.expr
    selector = arg.vector if isinstance(arg, MatrixSelector) else arg
    labels: dict[str, str] = {}
    if isinstance(selector, VectorSelector):
        seen: set[str] = set()
        for matcher in selector.matchers:
            if matcher.label == "__name__":
                continue
            if matcher.op == "=" and matcher.label not in seen:
                labels[matcher.label] = matcher.value
            elif matcher.label in labels:
                del labels[matcher.label]
            seen.add(matcher.label)
    return labels
