"""PromQL's aggregation operators over an instant vector, per evaluation time, with
``by``/``without``. ``sum avg min max count stddev stdvar group quantile`` reduce each class
with the engine's :func:`~query_dsl.reduce.reduce_matrix`; ``topk``/``bottomk`` keep the
series themselves; ``count_values`` makes a series per distinct value (and class): it finds
them first, by blocks of evaluation times, and asks the query's budget for their rows before
it makes them.

A result series carries the ``by`` labels (those a member has), or every label but the
``without`` ones and the name.

``sum avg min max count group`` of a range function computed by blocks of series (``rate``,
``increase``...: ``query_dsl.promql.ranges.rate_blocks``) reduce each block before the next
is computed (:func:`aggregate_blocks`): no series x evaluation times matrix is made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from bookkeeper.ground import LabelColumn
from query_dsl.exceptions import QueryTypeError
from query_dsl.matrix import Matrix
from query_dsl.promql.ast import Aggregation
from query_dsl.promql.labels import prometheus_order
from query_dsl.promql.stats import quantile_of
from query_dsl.promql.texts import value_strs
from query_dsl.promql.values import NAN_VALUE, absent, is_nan_value, present
from query_dsl.reduce import reduce_blocks, reduce_matrix
from query_dsl.series_table import SeriesTable, class_order

__all__ = ["FUSED_OPS", "aggregate", "aggregate_blocks"]

_REDUCED = {"sum": "sum", "avg": "mean", "min": "min", "max": "max", "count": "count", "stddev": "stddev"}
FUSED_OPS = frozenset({"sum", "avg", "min", "max", "count", "group"})


def _by_name(node: Aggregation) -> bool:
    """``by (__name__, ...)``: the name is grouped on, and kept, as Prometheus does."""
    return not node.without and "__name__" in node.grouping


def _named(table: SeriesTable, node: Aggregation) -> SeriesTable:
    """``table`` with its names as a label column when ``node`` groups by the name."""
    return SeriesTable(table.names, {**table.columns, "__name__": table.names}) if _by_name(node) else table


def _grouping(node: Aggregation) -> tuple[list[str] | None, list[str] | None]:
    if node.without:
        return None, [label for label in node.grouping if label != "__name__"]
    return list(node.grouping), None


def _result_table(table: SeriesTable, node: Aggregation) -> SeriesTable:
    """The answer's table of the reduce's ``table``: made once per table and grouping (the
    reduce's table is remembered with its input's, so its answer's order and label texts
    are made once too)."""
    return table.derived(
        f"promql_aggregation:{node.without}:{node.grouping}", lambda t: _make_result(t, node)
    )


def _make_result(table: SeriesTable, node: Aggregation) -> SeriesTable:
    if node.without:
        return table.restrict(drop=node.grouping).with_name("")
    kept = table.restrict(keep=node.grouping)
    if "__name__" not in kept.columns:
        return kept.with_name("")
    return SeriesTable(kept.columns["__name__"], kept.restrict(drop=["__name__"]).columns)


def _classes(m: Matrix, node: Aggregation) -> tuple[np.ndarray, np.ndarray]:
    if node.without:
        labels = [label for label in m.table.columns if label not in node.grouping]
    else:
        labels = list(node.grouping)
    return _named(m.table, node).groups(labels)


def _no_budget(nbytes: int, what: str) -> None:
    """A budget that grants everything."""


def aggregate(
    node: Aggregation,
    m: Matrix,
    param: np.ndarray | str | None,
    need: Callable[[int, str], None] = _no_budget,
) -> Matrix:
    """``node.op`` over ``m``; ``param`` the scalar per evaluation time (topk, bottomk,
    quantile) or the label (count_values). ``need`` is asked for the bytes of what
    ``count_values`` makes, once it knows how many series (a query's budget's ``need``)."""
    if node.op in _REDUCED or node.op in ("stdvar", "group"):
        by, without = _grouping(node)
        name = _REDUCED.get(node.op, "stddev" if node.op == "stdvar" else "count")
        m = Matrix.from_table(_named(m.table, node), m.timestamps, m.values, m.step_ms)
        reduced = reduce_matrix(m, name, by=by, without=without)
        values = _nan_samples(node.op, m, _finish(node.op, reduced.values), by, without)
        return Matrix.from_table(_result_table(reduced.table, node), m.timestamps, values, m.step_ms)
    if node.op == "quantile":
        assert isinstance(param, np.ndarray)  # the parser checked the types
        return _quantile(node, m, param)
    if node.op in ("topk", "bottomk"):
        assert isinstance(param, np.ndarray)  # the parser checked the types
        return _top(node, m, param)
    assert isinstance(param, str)  # count_values: the parser checked the types
    return _count_values(node, m, param, need)


def aggregate_blocks(
    node: Aggregation,
    table: SeriesTable,
    timestamps: np.ndarray,
    step_ms: int,
    blocks: Iterable[tuple[int, np.ndarray]],
) -> Matrix:
    """``node.op`` (one of :data:`FUSED_OPS`, without a parameter) over the series of
    ``table`` whose values come in ``blocks`` (:func:`query_dsl.reduce.reduce_blocks`)."""
    by, without = _grouping(node)
    name = _REDUCED.get(node.op, "count")
    reduced, values = reduce_blocks(_named(table, node), len(timestamps), blocks, name, by, without)
    return Matrix.from_table(_result_table(reduced, node), timestamps, _finish(node.op, values), step_ms)


def _finish(op: str, values: np.ndarray) -> np.ndarray:
    """What ``stdvar``, ``group`` and ``count`` make of the reduce's answer."""
    if op == "stdvar":
        return values**2
    if op == "group":
        return np.where(values > 0, 1.0, np.nan)
    if op == "count":
        return np.where(values > 0, values, np.nan)
    return values


def _nan_samples(
    op: str, m: Matrix, values: np.ndarray, by: list[str] | None, without: list[str] | None
) -> np.ndarray:
    """The reduced ``values`` (which saw no NaN sample) with the NaN samples of ``m`` as
    Prometheus counts them: ``count``/``group`` count them, ``min``/``max`` are NaN only
    where every sample is, ``sum avg stddev stdvar`` are NaN where one sample is."""
    flags = is_nan_value(m.values)
    if not flags.any():
        return values
    counts = reduce_matrix(
        m.with_values(np.where(flags, 1.0, np.nan)), "count", by=by, without=without
    ).values
    nan = np.nan_to_num(counts) > 0
    if op in ("count", "group"):
        total = np.nan_to_num(values) + np.nan_to_num(counts)
        return np.where(total > 0, 1.0 if op == "group" else total, np.nan)
    if op in ("min", "max"):
        return np.where(np.isnan(values) & nan, NAN_VALUE, values)
    return np.where(nan, NAN_VALUE, values)


def _quantile(node: Aggregation, m: Matrix, q: np.ndarray) -> Matrix:
    classes, firsts = _classes(m, node)
    order, starts = class_order(classes, len(firsts))
    bounds = [*starts.tolist(), len(m)]
    out = np.full((len(firsts), len(m.timestamps)), np.nan)
    for index in range(len(firsts)):
        out[index] = quantile_of(q, m.values[order[bounds[index] : bounds[index + 1]]], axis=0)
    table = _result_table(_named(m.table, node).take(firsts), node)
    return Matrix.from_table(table, m.timestamps, out, m.step_ms)


def _top(node: Aggregation, m: Matrix, k: np.ndarray) -> Matrix:
    classes, firsts = _classes(m, node)
    keep = np.zeros(m.values.shape, dtype=bool)
    sign = -1.0 if node.op == "topk" else 1.0
    too_big = np.abs(np.nan_to_num(k)) >= 2.0**63
    if too_big.any():
        raise QueryTypeError(f"Scalar value {float(k[too_big][0]):g} overflows int64")
    counts = np.clip(np.nan_to_num(k, nan=0.0), 0, len(m)).astype(np.int64)  # k < 1: none; k > series: all
    labelled = prometheus_order(m)  # ties go to the series first in label order, as Prometheus's heap
    for index in range(len(firsts)):
        members = labelled[classes[labelled] == index]
        values = m.values[members]
        missing = absent(values)  # no sample last, NaN samples before them (as Prometheus's heap)
        key = np.where(missing, np.inf, np.where(np.isnan(values), np.finfo(np.float64).max, sign * values))
        ranks = np.argsort(np.argsort(key, axis=0, kind="stable"), axis=0, kind="stable")
        keep[members] = (ranks < counts[None, :]) & ~missing
    values = np.where(keep, m.values, np.nan)
    rows = np.flatnonzero(keep.any(axis=1))
    return Matrix.from_table(m.table.take(rows), m.timestamps, values[rows], m.step_ms)


_COLUMN_CELLS = 1 << 18  # cells of the block of evaluation times count_values reads at a time
_KEY_BYTES = 160  # what finding a block's distinct values costs per cell: positions, keys, sorts
_LABEL_BYTES = 400  # a result series' label dict, its value's text and its name


def _samples(m: Matrix, columns: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The row, the column and the value's bits of each sample of ``columns`` (every NaN the
    same bits, as its text is one)."""
    block = m.values[:, columns]
    rows, cols = np.nonzero(present(block))
    found = block[rows, cols]
    return rows, cols + (columns.start or 0), np.where(np.isnan(found), np.nan, found).view(np.uint64)


def _count_values(
    node: Aggregation, m: Matrix, label: str, need: Callable[[int, str], None] = _no_budget
) -> Matrix:
    """A series per class and distinct value, counting the class's samples of that value at
    each time. Three passes over blocks of evaluation times, on integer keys only: the
    distinct values, then the distinct (value, class) keys (their count is the answer's
    series, asked of ``need`` before they are made), then the counts."""
    classes, firsts = _classes(m, node)
    steps, width = len(m.timestamps), max(1, _COLUMN_CELLS // max(len(m), 1))
    blocks = [slice(start, start + width) for start in range(0, steps, width)]
    need(
        len(m) * min(width, steps) * _KEY_BYTES,
        f"count_values' blocks of {len(m):,} series x {width:,} times",
    )
    values = np.zeros(0, dtype=np.uint64)
    for columns in blocks:
        values = np.union1d(values, _samples(m, columns)[2])
    span = max(len(firsts), 1)

    def keys(columns: slice) -> tuple[np.ndarray, np.ndarray]:
        rows, cols, bits = _samples(m, columns)
        return np.searchsorted(values, bits).astype(np.int64) * span + classes[rows], cols

    distinct = np.zeros(0, dtype=np.int64)
    for columns in blocks:
        distinct = np.union1d(distinct, keys(columns)[0])
    need(
        len(distinct) * (steps * 8 + _LABEL_BYTES),
        f"count_values' {len(distinct):,} series (distinct values) x {steps:,} evaluation times",
    )
    counts = np.zeros((len(distinct), steps))
    for columns in blocks:
        found, cols = keys(columns)
        np.add.at(counts, (np.searchsorted(distinct, found), cols), 1.0)
    counts[counts == 0] = np.nan
    base = _result_table(_named(m.table, node).take(firsts), node).take(distinct % span)
    texts = LabelColumn(value_strs(values.view(np.float64)), (distinct // span).astype(np.int32))
    table = SeriesTable(base.names, {**base.columns, label: texts})  # the label replaces a member's
    return Matrix.from_table(table, m.timestamps, counts, m.step_ms)
