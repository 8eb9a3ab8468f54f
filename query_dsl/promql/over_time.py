"""The functions of one window's samples (``avg_over_time``, ``changes``, ``deriv``...):
each takes windows as rows: their values ``[rows, samples]`` (NaN where a row has no sample,
:data:`~query_dsl.promql.values.NAN_VALUE` for a sample that is NaN), the samples' times
(ms, ``[rows, samples]``), each row's window end (ms, ``[rows]``) and the range, and answers
a value per row (NaN: no output; ``NAN_VALUE``: a NaN output, ``settle``d).
:mod:`query_dsl.promql.ranges` cuts the windows (every series' window at every evaluation
time, stacked) and holds the vectorised ``rate`` family.

A NaN sample is a sample, as in Prometheus: ``count_over_time`` counts it,
``sum``/``avg``/``stddev`` and the regressions turn NaN, ``min``/``max`` pass it over unless
every sample is NaN, ``changes`` counts no change between two NaN, ``resets`` none at a NaN,
and ``quantile_over_time`` sorts NaN first, as Go's sort does.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from query_dsl.exceptions import QueryTypeError
from query_dsl.promql.stats import quantile_of
from query_dsl.promql.values import present as is_sample
from query_dsl.promql.values import settle

__all__ = ["RANGE_FUNCTIONS", "RangeFunction", "down", "previous_in_time"]

RangeFunction = Callable[[np.ndarray, np.ndarray, np.ndarray, int, tuple[float, ...]], np.ndarray]


def _positions(present: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How many samples, the first and the last sample's column, per series."""
    count = present.sum(axis=1)
    width = present.shape[1]
    first = np.argmax(present, axis=1)
    last = width - 1 - np.argmax(present[:, ::-1], axis=1)
    return count, first, last


_NARROW = 256  # series: below this, the row loop's per-row call costs more than striding


def down(ufunc: np.ufunc, array: np.ndarray, reverse: bool = False) -> np.ndarray:
    """``ufunc.accumulate(array, axis=0)`` of a time-major array (from the last row up with
    ``reverse``), in place, a row at a time: contiguous rows, where numpy's accumulate down
    the first axis strides across them (ten times slower for a block of series); a narrow
    array (a few series) in one call."""
    if array.ndim == 2 and array.shape[1] < _NARROW:
        view = array[::-1] if reverse else array
        ufunc.accumulate(view, axis=0, out=view)
        return array
    order = range(len(array) - 2, -1, -1) if reverse else range(1, len(array))
    step = 1 if reverse else -1
    for row in order:
        ufunc(array[row + step], array[row], out=array[row])
    return array


def _previous(values: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each column, the value of the series' previous sample, and whether it has one."""
    out, found = previous_in_time(values.T, present.T)
    return out.T, found.T


def previous_in_time(values: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_previous`` of time-major ``values`` ``[times, series]`` (samples where
    ``present``): for each row, each series' value at its sample before (NaN: none), and
    whether there is one (the value may be a NaN sample)."""
    last_seen = down(np.maximum, np.where(present, np.arange(len(values))[:, None], -1))
    before = np.full_like(last_seen, -1)
    before[1:] = last_seen[:-1]
    out = np.take_along_axis(values, np.maximum(before, 0), axis=0)
    found = before >= 0
    out[~found] = np.nan
    return out, found


def _regression(values: np.ndarray, times: np.ndarray, origin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares slope (per second) and value at ``origin`` (ms, per series) of each
    series' samples; a constant series has slope 0 (NaN if it is infinite). The sums along
    a row add in the order of their temporaries' layout, which numpy picks from the inputs':
    they are made as numpy makes them, so that the answers stay what they were."""
    present = is_sample(values)
    count = present.sum(axis=1)
    first = np.argmax(present, axis=1)
    x = np.where(present, (times - origin[:, None]) / 1000, 0.0)
    y = np.where(present, values, 0.0)
    with np.errstate(all="ignore"):
        n = count.astype(np.float64)
        sum_x, sum_y = x.sum(axis=1), y.sum(axis=1)
        cov = (x * y).sum(axis=1) - sum_x * sum_y / n
        var = (x * x).sum(axis=1) - sum_x * sum_x / n
        slope = cov / var
        intercept = sum_y / n - slope * sum_x / n
        first_v = values[np.arange(len(values)), first]
        same = np.ones(values.shape, dtype=bool)
        constant = np.equal(values, first_v[:, None], out=same, where=present).all(axis=1)
        slope = np.where(constant, np.where(np.isinf(first_v), np.nan, 0.0), slope)
        intercept = np.where(constant, np.where(np.isinf(first_v), np.nan, first_v), intercept)
    missing = count < 2
    return settle(slope, missing), settle(intercept, missing)


def _deriv(
    values: np.ndarray, times: np.ndarray, end_ms: np.ndarray, range_ms: int, _: tuple[float, ...]
) -> np.ndarray:
    first = np.argmax(is_sample(values), axis=1)
    return _regression(values, times, times[np.arange(len(values)), first])[0]


def _predict_linear(
    values: np.ndarray, times: np.ndarray, end_ms: np.ndarray, range_ms: int, params: tuple[float, ...]
) -> np.ndarray:
    slope, intercept = _regression(values, times, end_ms)
    return settle(slope * params[0] + intercept, _no_output(slope))


def _holt_winters(
    values: np.ndarray, times: np.ndarray, end_ms: np.ndarray, range_ms: int, params: tuple[float, ...]
) -> np.ndarray:
    """Double exponential smoothing of each series' samples (Prometheus's ``holt_winters``):
    the level after the last sample, with smoothing factor ``sf`` and trend factor ``tf``."""
    smoothing, trend = params
    for name, factor in (("smoothing", smoothing), ("trend", trend)):
        if not 0 < factor < 1:
            raise QueryTypeError(f"invalid {name} factor. Expected: 0 < {name[0]}f < 1, got: {factor:g}")
    seen = np.zeros(len(values), dtype=np.int64)
    previous, level, slope = (np.zeros(len(values)) for _ in range(3))
    for column in values.T:
        present = is_sample(column)
        start = present & (seen == 0)
        level = np.where(start, column, level)
        second = present & (seen == 1)
        slope = np.where(second, column - level, slope)
        later = present & (seen >= 2)
        slope = np.where(later, trend * (level - previous) + (1 - trend) * slope, slope)
        moving = second | later
        smoothed = smoothing * column + (1 - smoothing) * (level + slope)
        previous = np.where(moving, level, previous)
        level = np.where(moving, smoothed, level)
        seen += present
    return settle(level, seen < 2)


def _empty_rows(present: np.ndarray) -> np.ndarray:
    """Rows with no sample: no output."""
    empty: np.ndarray = np.logical_not(present.any(axis=1))
    return empty


def _no_output(values: np.ndarray) -> np.ndarray:
    """Rows of a function's answer with no output (NaN that is not a NaN sample)."""
    return ~is_sample(values)


def _changes(
    values: np.ndarray, times: np.ndarray, end_ms: np.ndarray, range_ms: int, _: tuple[float, ...]
) -> np.ndarray:
    present = is_sample(values)
    previous, found = _previous(values, present)
    both_nan = np.isnan(values) & np.isnan(previous)
    changed = present & found & (values != previous) & ~both_nan
    return np.where(present.any(axis=1), changed.sum(axis=1).astype(np.float64), np.nan)


def _resets(
    values: np.ndarray, times: np.ndarray, end_ms: np.ndarray, range_ms: int, _: tuple[float, ...]
) -> np.ndarray:
    present = is_sample(values)
    dropped = present & (values < _previous(values, present)[0])  # NaN compares false
    return np.where(present.any(axis=1), dropped.sum(axis=1).astype(np.float64), np.nan)


def _moments(values: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the samples' count, sum and mean (NaN samples make the sum NaN)."""
    count = present.sum(axis=1).astype(np.float64)
    total = np.where(present, values, 0.0).sum(axis=1)
    return count, total, total / count


def _over_time(name: str) -> RangeFunction:
    """``<name>_over_time`` for the aggregates of a window's samples."""

    def run(
        values: np.ndarray, times: np.ndarray, end_ms: np.ndarray, range_ms: int, _: tuple[float, ...]
    ) -> np.ndarray:
        present = is_sample(values)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # rows of NaN only
            count, total, mean = _moments(values, present)
            if name in ("min", "max"):  # NaN samples passed over unless every one is NaN
                out = (np.nanmin if name == "min" else np.nanmax)(np.where(present, values, np.nan), axis=1)
            elif name in ("stddev", "stdvar"):  # written once, laid out as values: the sum's order
                deviations = np.zeros_like(values)
                np.subtract(values, mean[:, None], out=deviations, where=present)
                variance = np.multiply(deviations, deviations, out=deviations).sum(axis=1) / count
                out = np.sqrt(variance) if name == "stddev" else variance
            else:
                out = {"sum": total, "avg": mean, "count": count}[name]
        return settle(out, _empty_rows(present))

    return run


def _last(
    values: np.ndarray, times: np.ndarray, end_ms: np.ndarray, range_ms: int, _: tuple[float, ...]
) -> np.ndarray:
    present = is_sample(values)
    _count, _first, last = _positions(present)
    return settle(values[np.arange(len(values)), last], _empty_rows(present))


def _present(
    values: np.ndarray, times: np.ndarray, end_ms: np.ndarray, range_ms: int, _: tuple[float, ...]
) -> np.ndarray:
    return np.where(is_sample(values).any(axis=1), 1.0, np.nan)


def _quantile(
    values: np.ndarray, times: np.ndarray, end_ms: np.ndarray, range_ms: int, params: tuple[float, ...]
) -> np.ndarray:
    """Prometheus's quantile of each window's samples; with NaN samples, sorted first (Go's
    order), an interpolation that touches one is NaN."""
    present = is_sample(values)
    q = params[0]
    nan_samples = present & np.isnan(values)
    if not nan_samples.any() or not 0 <= q <= 1:
        return settle(quantile_of(q, values, axis=1), _empty_rows(present))
    # order: NaN samples, then numbers ascending, then no sample
    order = np.lexsort((np.where(nan_samples, 0.0, values), ~nan_samples, ~present), axis=1)
    ranked = np.take_along_axis(values, order, axis=1)
    count = present.sum(axis=1)
    rank = q * (np.maximum(count, 1) - 1)
    lower = np.floor(rank).astype(np.int64)
    upper = np.minimum(lower + 1, np.maximum(count - 1, 0))
    weight = rank - lower
    rows = np.arange(len(values))
    with np.errstate(all="ignore"):
        out = ranked[rows, lower] * (1 - weight) + ranked[rows, upper] * weight
    return settle(out, count == 0)


RANGE_FUNCTIONS: dict[str, RangeFunction] = {
    "deriv": _deriv,
    "holt_winters": _holt_winters,
    "predict_linear": _predict_linear,
    "changes": _changes,
    "resets": _resets,
    "avg_over_time": _over_time("avg"),
    "min_over_time": _over_time("min"),
    "max_over_time": _over_time("max"),
    "sum_over_time": _over_time("sum"),
    "count_over_time": _over_time("count"),
    "stddev_over_time": _over_time("stddev"),
    "stdvar_over_time": _over_time("stdvar"),
    "last_over_time": _last,
    "present_over_time": _present,
    "quantile_over_time": _quantile,
}
