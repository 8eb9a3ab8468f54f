"""Functions of a range vector (``rate(x[5m])``, ``avg_over_time(x[1h])``...): for each
evaluation time ``t``, the samples of each series in ``[t - range, t]`` (both ends closed,
as Prometheus 2 reads a range) give one value, or none.

Each function takes the window's values ``[series, samples]`` (NaN where a series has no
sample), the samples' times (ms), the window's ends and the range, and answers a value per
series (NaN: no output). Prometheus's rules: ``rate``/``increase``/``delta`` extrapolate
towards the window's ends (not further than half an average interval past the first and
last samples, and never below zero for counters), counter resets add the value before the
drop, ``irate``/``idelta`` use the last two samples.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from query_dsl.promql.stats import quantile_of

__all__ = ["RANGE_FUNCTIONS", "RangeFunction", "evaluate_range"]

RangeFunction = Callable[[np.ndarray, np.ndarray, int, int, tuple[float, ...]], np.ndarray]


def _positions(present: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How many samples, the first and the last sample's column, per series."""
    count = present.sum(axis=1)
    width = present.shape[1]
    first = np.argmax(present, axis=1)
    last = width - 1 - np.argmax(present[:, ::-1], axis=1)
    return count, first, last


def _previous(values: np.ndarray) -> np.ndarray:
    """For each column, the value of the series' previous sample (NaN: none)."""
    present = ~np.isnan(values)
    index = np.where(present, np.arange(values.shape[1])[None, :], -1)
    last_seen = np.maximum.accumulate(index, axis=1)
    before = np.full_like(last_seen, -1)
    before[:, 1:] = last_seen[:, :-1]
    rows = np.arange(values.shape[0])[:, None]
    out = values[rows, np.maximum(before, 0)]
    out[before < 0] = np.nan
    return out


def _extrapolated(is_counter: bool, is_rate: bool) -> RangeFunction:
    def run(
        values: np.ndarray, times: np.ndarray, end_ms: int, range_ms: int, _: tuple[float, ...]
    ) -> np.ndarray:
        present = ~np.isnan(values)
        count, first, last = _positions(present)
        rows = np.arange(len(values))
        first_v, last_v = values[rows, first], values[rows, last]
        first_t, last_t = times[first].astype(np.float64), times[last].astype(np.float64)
        result = last_v - first_v
        if is_counter:
            previous = _previous(values)
            drops = present & (values < previous)
            result = result + np.where(drops, previous, 0.0).sum(axis=1)
        with np.errstate(all="ignore"):
            to_start = (first_t - (end_ms - range_ms)) / 1000
            to_end = (end_ms - last_t) / 1000
            sampled = (last_t - first_t) / 1000
            average = sampled / (count - 1)
            if is_counter:
                to_zero = sampled * (first_v / result)
                shorter = (result > 0) & (first_v >= 0) & (to_zero < to_start)
                to_start = np.where(shorter, to_zero, to_start)
            threshold = average * 1.1
            interval = sampled + np.where(to_start < threshold, to_start, average / 2)
            interval += np.where(to_end < threshold, to_end, average / 2)
            factor = interval / sampled
            if is_rate:
                factor /= range_ms / 1000
            out = result * factor
        return np.where(count >= 2, out, np.nan)

    return run


def _instant(is_rate: bool) -> RangeFunction:
    def run(
        values: np.ndarray, times: np.ndarray, end_ms: int, range_ms: int, _: tuple[float, ...]
    ) -> np.ndarray:
        present = ~np.isnan(values)
        count, _first, last = _positions(present)
        rows = np.arange(len(values))
        index = np.where(present, np.arange(values.shape[1])[None, :], -1)
        index[rows, last] = -1
        before = index.max(axis=1)
        last_v, prev_v = values[rows, last], values[rows, np.maximum(before, 0)]
        with np.errstate(all="ignore"):
            if not is_rate:
                out = last_v - prev_v
            else:
                increase = np.where(last_v < prev_v, last_v, last_v - prev_v)
                seconds = (times[last] - times[np.maximum(before, 0)]) / 1000
                out = np.where(seconds > 0, increase / seconds, np.nan)
        return np.where(count >= 2, out, np.nan)

    return run


def _deriv(
    values: np.ndarray, times: np.ndarray, end_ms: int, range_ms: int, _: tuple[float, ...]
) -> np.ndarray:
    present = ~np.isnan(values)
    count, first, _last = _positions(present)
    x = (times[None, :] - times[first][:, None]) / 1000
    x = np.where(present, x, 0.0)
    y = np.where(present, values, 0.0)
    with np.errstate(all="ignore"):
        n = count.astype(np.float64)
        sum_x, sum_y = x.sum(axis=1), y.sum(axis=1)
        cov = (x * y).sum(axis=1) - sum_x * sum_y / n
        var = (x * x).sum(axis=1) - sum_x * sum_x / n
        slope = cov / var
        rows = np.arange(len(values))
        first_v = values[rows, first]
        constant = (np.where(present, values, first_v[:, None]) == first_v[:, None]).all(axis=1)
        slope = np.where(constant, np.where(np.isinf(first_v), np.nan, 0.0), slope)
    return np.where(count >= 2, slope, np.nan)


def _changes(
    values: np.ndarray, times: np.ndarray, end_ms: int, range_ms: int, _: tuple[float, ...]
) -> np.ndarray:
    present = ~np.isnan(values)
    previous = _previous(values)
    changed = present & ~np.isnan(previous) & (values != previous)
    return np.where(present.any(axis=1), changed.sum(axis=1).astype(np.float64), np.nan)


def _resets(
    values: np.ndarray, times: np.ndarray, end_ms: int, range_ms: int, _: tuple[float, ...]
) -> np.ndarray:
    present = ~np.isnan(values)
    dropped = present & (values < _previous(values))
    return np.where(present.any(axis=1), dropped.sum(axis=1).astype(np.float64), np.nan)


def _nan_aggregate(function: Callable[..., np.ndarray]) -> RangeFunction:
    def run(
        values: np.ndarray, times: np.ndarray, end_ms: int, range_ms: int, _: tuple[float, ...]
    ) -> np.ndarray:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: no output
            out = function(values, axis=1)
        return np.where((~np.isnan(values)).any(axis=1), out, np.nan)

    return run


def _last(
    values: np.ndarray, times: np.ndarray, end_ms: int, range_ms: int, _: tuple[float, ...]
) -> np.ndarray:
    present = ~np.isnan(values)
    _count, _first, last = _positions(present)
    return np.where(present.any(axis=1), values[np.arange(len(values)), last], np.nan)


def _present(
    values: np.ndarray, times: np.ndarray, end_ms: int, range_ms: int, _: tuple[float, ...]
) -> np.ndarray:
    return np.where((~np.isnan(values)).any(axis=1), 1.0, np.nan)


def _quantile(
    values: np.ndarray, times: np.ndarray, end_ms: int, range_ms: int, params: tuple[float, ...]
) -> np.ndarray:
    return quantile_of(params[0], values, axis=1)


RANGE_FUNCTIONS: dict[str, RangeFunction] = {
    "rate": _extrapolated(is_counter=True, is_rate=True),
    "increase": _extrapolated(is_counter=True, is_rate=False),
    "delta": _extrapolated(is_counter=False, is_rate=False),
    "irate": _instant(is_rate=True),
    "idelta": _instant(is_rate=False),
    "deriv": _deriv,
    "changes": _changes,
    "resets": _resets,
    "avg_over_time": _nan_aggregate(np.nanmean),
    "min_over_time": _nan_aggregate(np.nanmin),
    "max_over_time": _nan_aggregate(np.nanmax),
    "sum_over_time": _nan_aggregate(np.nansum),
    "count_over_time": _nan_aggregate(lambda v, axis: (~np.isnan(v)).sum(axis=axis).astype(np.float64)),
    "stddev_over_time": _nan_aggregate(np.nanstd),
    "stdvar_over_time": _nan_aggregate(np.nanvar),
    "last_over_time": _last,
    "present_over_time": _present,
    "quantile_over_time": _quantile,
}


def evaluate_range(
    name: str,
    values: np.ndarray,
    times: np.ndarray,
    ends: np.ndarray,
    range_ms: int,
    params: np.ndarray,
    check: Callable[[], None],
) -> np.ndarray:
    """``name`` over each window ``[end - range_ms, end]`` of ``ends``: ``[series, ends]``.
    ``params`` holds the function's scalar arguments per evaluation time ``[params, ends]``."""
    function = RANGE_FUNCTIONS[name]
    out = np.full((values.shape[0], len(ends)), np.nan)
    low = np.searchsorted(times, ends - range_ms, side="left")
    high = np.searchsorted(times, ends, side="right")
    cache: dict[tuple[int, int, tuple[float, ...]], np.ndarray] = {}
    for column, (lo, hi, end) in enumerate(zip(low.tolist(), high.tolist(), ends.tolist(), strict=True)):
        if hi <= lo or not values.shape[0]:
            continue
        if not column % 64:
            check()
        args = tuple(float(p) for p in params[:, column])
        window_end = int(end)
        key = (lo, hi, args)
        if name not in ("rate", "increase", "delta") and key in cache:  # the same samples: the same answer
            out[:, column] = cache[key]
            continue
        answer = function(values[:, lo:hi], times[lo:hi], window_end, range_ms, args)
        cache[key] = answer
        out[:, column] = answer
    return out
