"""PromQL's binary operators between instant vectors and scalars, with vector matching
(``on``/``ignoring``, ``group_left``/``group_right`` and their included labels) and ``bool``.

Series are matched on their label codes with the engine's
:func:`~query_dsl.series_table.joint_classes`; values are computed for every matched pair
at once with the engine's operator tables (:mod:`query_dsl.apply`). A class that holds
several series on a side that must be unique is an error only where two of them have a
value at the same evaluation time (as Prometheus checks per step); otherwise they are one
series that changed labels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, TypeVar

import numpy as np

from bookkeeper.ground import LabelColumn
from query_dsl.apply import ARITHMETIC, COMPARISONS
from query_dsl.exceptions import MatchingError
from query_dsl.matrix import Matrix
from query_dsl.promql.ast import VectorMatching
from query_dsl.promql.labels import ensure_unique
from query_dsl.promql.values import Scalar, absent, present, settle
from query_dsl.series_table import SeriesTable, joint_classes, kept_for

__all__ = ["scalar_op", "vector_op", "vector_scalar_op"]

T = TypeVar("T")
_LAYOUTS_KEPT = 1 << 12  # series of both sides up to which a matching keeps their layouts
_MATCHINGS_SERIES = 1 << 19  # matchings remembered per left-hand table: this many series' worth, at most 256

_OPERATORS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    **ARITHMETIC,
    **COMPARISONS,
    "atan2": np.arctan2,
}


def _compute(op: str, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return _OPERATORS[op](left, right)


def scalar_op(op: str, left: np.ndarray, right: np.ndarray, as_bool: bool) -> np.ndarray:
    """Between two scalars (comparisons only with ``bool``, which the parser checked)."""
    values = _compute(op, left, right)
    return values.astype(np.float64) if op in COMPARISONS else values


def vector_scalar_op(op: str, m: Matrix, scalar: Scalar, as_bool: bool, scalar_left: bool) -> Matrix:
    """A vector and a scalar: the vector's series keep their labels (less the name, unless
    a comparison filters them)."""
    other = scalar.values[None, :]
    left, right = (other, m.values) if scalar_left else (m.values, other)
    result = _compute(op, left, right)
    missing = absent(m.values)
    if op in COMPARISONS:
        if as_bool:
            values = np.where(missing, np.nan, result.astype(np.float64))
            return Matrix.from_table(m.table.with_name(""), m.timestamps, values, m.step_ms)
        return m.with_values(np.where(result & ~missing, m.values, np.nan))
    return Matrix.from_table(_drop_name(m.table, op), m.timestamps, settle(result, missing), m.step_ms)


def _drop_name(table: SeriesTable, op: str) -> SeriesTable:
    """Arithmetic drops the metric name; ``atan2`` keeps it, as Prometheus 2 does."""
    return table if op == "atan2" else table.with_name("")


def _signature_labels(a: Matrix, b: Matrix, matching: VectorMatching) -> list[str]:
    if matching.on:
        return sorted(set(matching.labels) - {"__name__"})
    return sorted((set(a.table.columns) | set(b.table.columns)) - set(matching.labels))


class _Layout(NamedTuple):
    """How a side's series fall into the classes of a matching (derived from the classes
    alone, remembered with them): the number of classes, whether each series is its own
    class in order, whether each class has one series at most, and a representative row of
    each class (-1: none)."""

    classes: int
    identity: bool
    unique: bool
    first: np.ndarray


def _layout(classes: np.ndarray) -> _Layout:
    count = int(classes.max(initial=-1)) + 1
    identity = count == len(classes) and bool((classes == np.arange(count)).all())
    unique = identity or int(np.bincount(classes, minlength=count).max(initial=0)) <= 1
    first = np.full(count, -1, dtype=np.int64)
    first[classes[::-1]] = np.arange(len(classes))[::-1]
    first.setflags(write=False)
    return _Layout(count, identity, unique, first)


def _merge_unique(
    m: Matrix, classes: np.ndarray, layout: _Layout, side: str, table: SeriesTable, labels: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Per class, the row values (``[class, times]``) of a side that must be unique, and a
    representative row; ``MatchingError`` when two series of a class have a value at the
    same time."""
    count = layout.classes
    if layout.identity:  # a series per class, in order
        return m.values, layout.first
    merged = np.full((count, m.values.shape[1]), np.nan)
    if layout.unique:  # a series per class: as it is
        merged[classes] = m.values
    else:
        found = present(m.values)
        per_class = np.zeros((count, m.values.shape[1]), dtype=np.int64)
        np.add.at(per_class, classes, found.astype(np.int64))
        if (per_class > 1).any():
            row = int(np.flatnonzero((per_class[classes] > 1).any(axis=1))[0])
            raise MatchingError(
                f"found duplicate series for the match group {table.describe(row, labels)} "
                f"on the {side} hand-side of the operation: many-to-many matching not allowed: "
                "matching labels must be unique on one side"
            )
        rows, columns = np.nonzero(found)  # at most one of a class's series at each time
        merged[classes[rows], columns] = m.values[rows, columns]
    return merged, layout.first


class _Pairs(NamedTuple):
    """A one-to-one matching's classes that both sides hold (ascending), and the row of each
    on either side."""

    classes: np.ndarray
    many_rows: np.ndarray
    one_rows: np.ndarray


def _pairs(many: _Layout, one: _Layout) -> _Pairs:
    rows = np.flatnonzero(many.first >= 0)
    rows = rows[rows < len(one.first)]
    rows = rows[one.first[rows] >= 0]
    found = _Pairs(rows, many.first[rows], one.first[rows])
    for array in found:
        array.setflags(write=False)
    return found


_Side = tuple[Matrix, np.ndarray, _Layout, str]  # a side's matrix, classes, their layout, its name


def _one_to_one(
    many: _Side, one: _Side, labels: list[str], pairs: _Pairs | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A one-to-one matching's classes matched, the left-hand rows and the cells of either
    side; with ``pairs`` (each class one series at most on both sides: nothing to merge) by
    two gathers of rows."""
    if pairs is not None:
        many_cells = many[0].values.take(pairs.many_rows, axis=0)
        return pairs.classes, pairs.many_rows, one[0].values.take(pairs.one_rows, axis=0), many_cells
    one_m, one_classes, one_layout, one_side = one
    one_values, one_first = _merge_unique(one_m, one_classes, one_layout, one_side, one_m.table, labels)
    many_m, many_classes, many_layout, many_side = many
    many_values, many_first = _merge_unique(
        many_m, many_classes, many_layout, many_side, many_m.table, labels
    )
    found = _pairs(many_layout._replace(first=many_first), one_layout._replace(first=one_first))
    return found.classes, found.many_rows, one_values[found.classes], many_values[found.classes]


def _remembered(a: SeriesTable, b: SeriesTable, key: tuple[object, ...], make: Callable[[], T]) -> T:
    """``make()`` for the tables ``a`` and ``b`` and ``key``, made once per pair of tables
    and kept with ``a`` (``_MATCHINGS_SERIES`` series' worth of them; it holds ``b``): a
    selector's table is reused while it picks the same series, so a dashboard's matching
    finds its classes and its answer's table, with that table's order and label texts, made."""
    kept: dict[tuple[object, ...], tuple[SeriesTable, T]] = a.derived("promql_matchings", lambda _: {})
    full = (id(b), *key)
    found = kept.get(full)
    if found is not None and found[0] is b:
        return found[1]
    value = make()
    if len(kept) >= kept_for(a, _MATCHINGS_SERIES, len(b)):  # cleared whole: threads share it
        kept.clear()
    kept[full] = (b, value)
    return value


def _classes(
    a: SeriesTable, b: SeriesTable, labels: list[str]
) -> tuple[np.ndarray, np.ndarray, _Layout | None, _Layout | None]:
    """Each side's classes, and for small tables their layouts (kept with them: what a small
    query's matching would find each time; a large table's are found per query)."""
    left, right = joint_classes(a, b, labels)
    left.setflags(write=False)
    right.setflags(write=False)
    if len(left) + len(right) > _LAYOUTS_KEPT:
        return left, right, None, None
    return left, right, _layout(left), _layout(right)


def vector_op(op: str, a: Matrix, b: Matrix, matching: VectorMatching, as_bool: bool) -> Matrix:
    if op in ("and", "or", "unless"):
        return _set_op(op, a, b, matching)
    labels = _signature_labels(a, b, matching)
    left, right, left_layout, right_layout = _remembered(
        a.table, b.table, (tuple(labels),), lambda: _classes(a.table, b.table, labels)
    )
    if matching.card == "one-to-many":
        many, one, many_m, one_m, many_side, one_side = right, left, b, a, "right", "left"
        many_layout, one_layout = right_layout, left_layout
    else:
        many, one, many_m, one_m, many_side, one_side = left, right, a, b, "left", "right"
        many_layout, one_layout = left_layout, right_layout
    kept = one_layout is not None  # a small matching's layouts, and so its pairs, are kept
    one_layout = one_layout or _layout(one)
    one_first = one_layout.first  # a representative row of each class (the answer's labels)
    if matching.card == "one-to-one":
        many_layout = many_layout or _layout(many)
        rows, many_rows, one_cells, many_cells = _one_to_one(
            (many_m, many, many_layout, many_side),
            (one_m, one, one_layout, one_side),
            labels,
            _remembered(a.table, b.table, (tuple(labels), "pairs"), lambda: _pairs(many_layout, one_layout))
            if kept and many_layout.unique and one_layout.unique
            else None,
        )
    else:
        one_values, one_first = _merge_unique(one_m, one, one_layout, one_side, one_m.table, labels)
        in_range = many < len(one_first)
        many_rows = (
            np.flatnonzero(in_range & (one_first[np.minimum(many, len(one_first) - 1)] >= 0))
            if len(one_first)
            else np.zeros(0, dtype=np.int64)
        )
        one_cells, many_cells = one_values[many[many_rows]], many_m.values[many_rows]
    left_cells, right_cells = (
        (many_cells, one_cells) if matching.card != "one-to-many" else (one_cells, many_cells)
    )
    result = _compute(op, left_cells, right_cells)
    missing = absent(left_cells) | absent(right_cells)
    named = (
        "bool" if as_bool else "filter" if op in COMPARISONS else "atan2" if op == "atan2" else "arithmetic"
    )
    include = many[many_rows] if matching.card != "one-to-one" else rows
    table = _remembered(  # the rows matched follow from the classes alone
        a.table,
        b.table,
        (matching, named),
        lambda: _answer_table(_taken(many_m.table, many_rows), matching, one_m, one_first, include, named),
    )
    if op in COMPARISONS:
        if as_bool:
            values = np.where(missing, np.nan, result.astype(np.float64))
        else:
            values = np.where(result & ~missing, left_cells, np.nan)
    else:
        values = settle(result, missing)
    out = Matrix.from_table(table, a.timestamps, values, a.step_ms)
    keep = np.flatnonzero(present(values).any(axis=1))
    out = out if len(keep) == len(out) else out.select(keep)
    if matching.card != "one-to-one":
        ensure_unique(out, "multiple matches for labels: grouping labels must ensure unique matches")
    return out


def _taken(table: SeriesTable, rows: np.ndarray) -> SeriesTable:
    """``table``'s ``rows``, the table itself when they are its every row in order (a
    division of a selector by itself: no copy of a million series' codes)."""
    whole = len(rows) == len(table) and (rows == np.arange(len(rows))).all()
    return table if whole else table.take(rows)


def _answer_table(
    table: SeriesTable,
    matching: VectorMatching,
    one_m: Matrix,
    one_first: np.ndarray,
    classes: np.ndarray,
    named: str,
) -> SeriesTable:
    """The labels of a matching's answer: the "many" side's matched rows (``table``), kept
    on or less the matching labels (one-to-one), with the included labels of the "one"
    side, named as ``named`` says: ``filter`` (a comparison) keeps the names, ``atan2``
    too, ``bool`` and other arithmetic drop them."""
    if matching.card == "one-to-one":
        if matching.on:
            table = table.restrict(keep=matching.labels)
            table = table if "__name__" in matching.labels else table.with_name("")
        else:
            table = table.restrict(drop=matching.labels)
    if matching.include:
        table = _include(table, one_m, one_first, classes, matching.include)
    return table if named in ("filter", "atan2") else table.with_name("")


def _include(
    table: SeriesTable, one_m: Matrix, one_first: np.ndarray, classes: np.ndarray, include: tuple[str, ...]
) -> SeriesTable:
    """``group_left(l...)``: copy the labels ``l`` from the matched series of the one side."""
    columns = dict(table.columns)
    source_rows = one_first[classes]
    for label in include:
        column = one_m.table.columns.get(label)
        codes = np.full(len(table), -1, dtype=np.int32) if column is None else column.codes[source_rows]
        values = [] if column is None else column.values
        columns[label] = LabelColumn(values, codes).compact()
    return SeriesTable(table.names, columns)


def _set_op(op: str, a: Matrix, b: Matrix, matching: VectorMatching) -> Matrix:
    labels = _signature_labels(a, b, matching)
    left, right = joint_classes(a.table, b.table, labels)
    count = int(max(left.max(initial=-1), right.max(initial=-1))) + 1
    width = len(a.timestamps)

    def sampled(m: Matrix, classes: np.ndarray) -> np.ndarray:
        out = np.zeros((count, width), dtype=np.int64)
        np.add.at(out, classes, present(m.values).astype(np.int64))
        return out > 0

    if op == "and":
        on_right = sampled(b, right)
        values = np.where(on_right[left], a.values, np.nan)
        return _nonempty(a.with_values(values))
    if op == "unless":
        on_right = sampled(b, right)
        return _nonempty(a.with_values(np.where(on_right[left], np.nan, a.values)))
    on_left = sampled(a, left)
    extra = np.where(on_left[right], np.nan, b.values)
    table = a.table.concat(b.table)
    return _nonempty(Matrix.from_table(table, a.timestamps, np.vstack([a.values, extra]), a.step_ms))


def _nonempty(m: Matrix) -> Matrix:
    keep = np.flatnonzero(present(m.values).any(axis=1))
    return m if len(keep) == len(m) else m.select(keep)
