"""``avg_over_time``, ``sum_over_time``, ``min_over_time``, ``max_over_time``,
``count_over_time`` and ``last_over_time`` over time-major series with a sample in every
bucket whose samples of a bucket share one time (a scrape's, or the buckets' starts): every
series reads the same rows ``[first, last]`` in a window, so the window's function is a few
whole-row operations, as the DSL's window mappers are (docs/dsl.md): the sum, minimum or
maximum of the window's rows added up row after row (Prometheus's order for a sum), the
count one number per window, the last sample one row. No stacked copy of each window's
samples (``ranges.evaluate_range``'s way for gaps, differing times and the other functions).
"""

from __future__ import annotations

import numpy as np

from query_dsl.promql.values import settle

__all__ = ["DENSE_OVER_TIME", "over_time_rows"]

_FOLDS = {
    "sum_over_time": np.add,
    "avg_over_time": np.add,
    "min_over_time": np.minimum,
    "max_over_time": np.maximum,
}
DENSE_OVER_TIME = frozenset({*_FOLDS, "count_over_time", "last_over_time"})


def _rows(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values[rows]``, a view where ``rows`` are consecutive (a range query at the buckets'
    step: each window one row further on)."""
    picked: np.ndarray
    if len(rows) > 1 and rows[-1] - rows[0] == len(rows) - 1 and (np.diff(rows) == 1).all():
        picked = values[int(rows[0]) : int(rows[-1]) + 1]
    else:
        picked = values[rows]
    return picked


def over_time_rows(
    name: str, values: np.ndarray, first: np.ndarray, last: np.ndarray, valid: np.ndarray
) -> np.ndarray:
    """``name`` (one of :data:`DENSE_OVER_TIME`) of each window: ``values`` time-major
    ``[times, series]`` with no NaN, each window's rows ``[first, last]`` (``[windows]``,
    ``valid`` where it has a sample): ``[windows, series]``, NaN where a window has none."""
    out = np.full((len(first), values.shape[1]), np.nan)
    windows = np.flatnonzero(valid)
    if not len(windows):
        return out
    first, last = first[windows], last[windows]
    count = last - first + 1
    if name == "count_over_time":
        out[windows] = count[:, None].astype(np.float64)
        return out
    if name == "last_over_time":
        out[windows] = _rows(values, last)
        return out
    fold = _FOLDS[name]
    total = _rows(values, first).copy()
    with np.errstate(all="ignore"):  # inf - inf: a NaN sample's answer, settled below
        for offset in range(1, int(count.max())):
            longer = np.flatnonzero(count > offset)
            if len(longer) == len(count):
                fold(total, _rows(values, first + offset), out=total)
            else:
                total[longer] = fold(total[longer], _rows(values, first[longer] + offset))
        if name == "avg_over_time":
            total /= count[:, None]
    out[windows] = settle(total, np.zeros(1, dtype=bool))
    return out
