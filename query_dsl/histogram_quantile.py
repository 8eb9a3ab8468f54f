"""``histogram_quantile(m, q)``: the q-quantile of histograms kept as cumulative ``le`` buckets.

The series of ``m`` are a histogram's ``_bucket`` series (the bookkeeper's
``bk.histogram``, or a Prometheus exporter's through the ``prometheus`` source), usually
after ``map(rate, 5m)`` or ``map(increase, 1h)``. Classes are the series equal on every
label but ``le`` (a reduce ``without=[le]``); each class gives one series, with the labels
its members share, whose value at each instant is PromQL's ``histogram_quantile``:

- the buckets sorted by ``le`` (a bound that is not a number: the query is refused), their
  counts made monotonic (a later bucket below an earlier one is raised to it; a missing
  one counts as its predecessor);
- NaN where the class has no ``+Inf`` bucket, fewer than two buckets, or no observation;
  ``-Inf`` for ``q < 0``, ``+Inf`` for ``q > 1``;
- otherwise the rank ``q * count`` is found in the first bucket that reaches it and
  interpolated linearly inside it (from 0 for the first bucket when its bound is positive);
  a rank in the ``+Inf`` bucket answers the highest finite bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from query_dsl.exceptions import QueryTypeError
from query_dsl.matrix import Matrix
from query_dsl.series_table import class_order

__all__ = ["histogram_quantile"]

_CHECK_EVERY = 64


def _bounds(m: Matrix) -> np.ndarray:
    column = m.table.columns.get("le")
    if column is None or (column.codes < 0).any():
        raise QueryTypeError("histogram_quantile needs every series to have an 'le' label (a _bucket series)")
    try:
        values = np.array([float(v) for v in column.values], dtype=np.float64)
    except ValueError:
        bad = next(v for v in column.values if not _is_number(v))
        raise QueryTypeError(f"histogram_quantile: le={bad!r} is not a bucket bound") from None
    picked: np.ndarray = values[column.codes]
    return picked


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _quantile(q: float, bounds: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """One class: ``bounds`` sorted ascending, ``counts`` [bucket, time] cumulative."""
    steps = counts.shape[1]
    if len(bounds) < 2 or bounds[-1] != math.inf:
        return np.full(steps, np.nan)
    if q < 0 or q > 1:
        return np.full(steps, -math.inf if q < 0 else math.inf)
    cumulative = np.fmax.accumulate(counts, axis=0)  # monotonic; a NaN bucket takes its predecessor's
    total = cumulative[-1]
    rank = q * total
    reached = cumulative >= rank[None, :]
    bucket = np.argmax(reached, axis=0)  # the first bucket that reaches the rank
    cols = np.arange(steps)
    upper = bounds[bucket]
    lower = np.where(bucket > 0, bounds[np.maximum(bucket - 1, 0)], 0.0)
    below = np.where(bucket > 0, cumulative[np.maximum(bucket - 1, 0), cols], 0.0)
    inside = cumulative[bucket, cols] - below
    with np.errstate(all="ignore"):
        value = lower + (upper - lower) * ((rank - below) / inside)  # PromQL's order, to the last bit
    value = np.where((bucket == 0) & (upper <= 0), upper, value)
    value = np.where(bucket == len(bounds) - 1, bounds[-2], value)  # in +Inf: the highest finite bound
    return np.where(np.isnan(total) | (total <= 0), np.nan, value)


def histogram_quantile(m: Matrix, q: float, check: Callable[[], None] | None = None) -> Matrix:
    """``m``'s classes (every label but ``le``) as one q-quantile series each (module doc);
    ``check`` is called between classes (the evaluator's deadline)."""
    if math.isnan(q):
        raise QueryTypeError("histogram_quantile takes a number q, got NaN")
    bounds = _bounds(m) if len(m) else np.zeros(0)
    labels = [label for label in m.table.columns if label != "le"]
    classes, first = m.table.groups(labels)
    count = len(first)
    order, starts = class_order(classes, count)
    table = m.table.restrict(drop=["le"]).shared(order, starts)
    edges = [*starts.tolist(), len(m)]
    rows = []
    for i in range(count):
        if check is not None and not i % _CHECK_EVERY:
            check()
        members = order[edges[i] : edges[i + 1]]
        by_bound = members[np.argsort(bounds[members], kind="stable")]
        rows.append(_quantile(q, bounds[by_bound], m.values[by_bound]))
    values = np.vstack(rows) if rows else np.zeros((0, len(m.timestamps)))
    return Matrix.from_table(table, m.timestamps, values, m.step_ms)
