"""The window mappers that are differences of prefix sums: ``delta``, ``increase``, ``rate``
and the moving ``mean``, ``sum`` and ``count``, computed on the time-major layout.

Why time-major: a fetch answers a transposed view of VHMS's time-major rings, so its
``values.T`` is ``[instants, series]`` with each instant's row contiguous. Walking a series
along its row of the ``[series, instants]`` view strides by the series count (800 KB at
100,000 series), which is where a range query spent 85% of its time; along rows, every step
of the computation is one vectorized operation over a contiguous row of every series, and a
prefix sum is one addition of two rows per instant.

Every window ``(t - w, t]`` of aligned buckets is a difference of two rows:

- **dense** series (every value finite, and for ``increase`` and ``rate`` never a decrease)
  have their values at the window's own ends, so ``delta`` and ``increase`` are
  ``V[t] - V[t - w + 1]`` (a counter that never decreased gained exactly that), ``rate``
  that over the seconds between the two ends: one subtraction of two blocks of rows;
- the other series (gaps, resets, infinities) take the gap-aware way on a series-major copy
  of those series alone: the first and last value of each window found by forward and
  backward fills, a reset counted as a restart from 0 (the new value is the increment), and
  the increments summed as a difference of their prefix sums;
- the moving ``mean``, ``sum`` and ``count`` are differences of prefix sums of the values
  (NaN as 0) and of the present cells, for every series.

Each function takes a ``[instants, series]`` array (any strides), the window in buckets
(at most the instant count), the step and an ``out`` array of that shape that it fills;
series are independent, so a caller may pass any block of series (and of ``out``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

__all__ = ["PREFIX_WINDOWS", "PrefixWindow", "ffill_index", "prefix_sum"]


def prefix_sum(time_major: np.ndarray) -> np.ndarray:
    """Running sums along the instants of ``[instants, series]``: one addition of two
    contiguous rows per instant (``np.cumsum`` along that axis walks each series with a
    stride instead), in ``np.cumsum``'s order of additions, so the sums are the same to the
    bit."""
    rows = time_major if time_major.strides[-1] == time_major.itemsize else np.ascontiguousarray(time_major)
    out = np.empty(rows.shape, dtype=rows.dtype)
    if len(rows):
        out[0] = rows[0]
    for t in range(1, len(rows)):
        np.add(out[t - 1], rows[t], out=out[t])
    return out


def _starts(width: int, window: int) -> np.ndarray:
    """The first instant of the window ending at each instant."""
    return np.maximum(np.arange(width) - window + 1, 0)


def _end_difference(time_major: np.ndarray, out: np.ndarray, window: int) -> None:
    """``V[t] - V[t - w + 1]`` (``V[t] - V[0]`` while the window reaches before the axis)."""
    head = window - 1
    np.subtract(time_major[:head], time_major[:1], out=out[:head])
    np.subtract(time_major[head:], time_major[: len(time_major) - head], out=out[head:])


def _general(time_major: np.ndarray, counters: bool) -> np.ndarray:
    """The series (columns) that must take the gap-aware way: a value that is not finite,
    or for counters a decrease (a reset)."""
    finite: np.ndarray = np.isfinite(time_major).all(axis=0)
    if counters and len(time_major) > 1:
        finite &= ~(time_major[1:] < time_major[:-1]).any(axis=0)
    return np.flatnonzero(~finite)


def _with_gap_aware(
    time_major: np.ndarray,
    counters: bool,
    out: np.ndarray,
    dense: Callable[[np.ndarray, np.ndarray], None],
    gap_aware: Callable[[np.ndarray], np.ndarray],
) -> None:
    """``dense`` over every series into ``out``, then ``gap_aware`` over a series-major
    copy of the series that need it (:func:`_general`), written over their columns."""
    dense(time_major, out)
    general = _general(time_major, counters)
    if len(general):
        series_major = np.ascontiguousarray(time_major[:, general].T)
        out[:, general] = gap_aware(series_major).T


# -- the gap-aware way, series-major ------------------------------------------------------


def ffill_index(values: np.ndarray) -> np.ndarray:
    """For each cell, the column of the last non-NaN value at or before it (-1: none)."""
    columns = np.where(~np.isnan(values), np.arange(values.shape[1]), -1)
    return np.maximum.accumulate(columns, axis=1)


def _bfill_index(values: np.ndarray) -> np.ndarray:
    """For each cell, the column of the first non-NaN value at or after it (T: none)."""
    width = values.shape[1]
    columns = np.where(~np.isnan(values), np.arange(width), width)
    return np.minimum.accumulate(columns[:, ::-1], axis=1)[:, ::-1]


def _window_ends(values: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Columns of the first and last values inside each window, and whether both exist."""
    width = values.shape[1]
    last = ffill_index(values)
    first = _bfill_index(values)[:, _starts(width, window)]
    ok = (last >= 0) & (first <= last) & (first < width)
    return np.clip(first, 0, width - 1), np.clip(last, 0, width - 1), ok


def _take(values: np.ndarray, columns: np.ndarray) -> np.ndarray:
    return np.take_along_axis(values, columns, axis=1)


def _increments(values: np.ndarray) -> np.ndarray:
    """Increment from the previous value (skipping gaps); a decrease is a reset."""
    previous_column = np.roll(ffill_index(values), 1, axis=1)
    previous_column[:, 0] = -1
    has_previous = (previous_column >= 0) & ~np.isnan(values)
    previous = _take(values, np.clip(previous_column, 0, None))
    step = values - previous
    step = np.where(step < 0, values, step)  # counter reset: it restarted from 0
    return np.where(has_previous, step, 0.0)


def _gap_aware_delta(values: np.ndarray, window: int) -> np.ndarray:
    first, last, ok = _window_ends(values, window)
    return np.where(ok, _take(values, last) - _take(values, first), np.nan)


def _gap_aware_increase(values: np.ndarray, window: int, step_ms: int, per_second: bool) -> np.ndarray:
    cumulative = np.cumsum(_increments(values), axis=1)
    first, last, ok = _window_ends(values, window)
    gained = _take(cumulative, last) - _take(cumulative, first)
    if not per_second:
        return np.where(ok, gained, np.nan)
    seconds = (last - first) * (step_ms / 1000)
    ok &= seconds > 0
    return np.where(ok, gained / np.where(seconds > 0, seconds, 1), np.nan)


# -- the mappers, time-major ----------------------------------------------------------------


def _delta(time_major: np.ndarray, window: int, step_ms: int, out: np.ndarray) -> None:
    dense = partial(_end_difference, window=window)
    _with_gap_aware(time_major, False, out, dense, partial(_gap_aware_delta, window=window))


def _increase(time_major: np.ndarray, window: int, step_ms: int, out: np.ndarray) -> None:
    gap_aware = partial(_gap_aware_increase, window=window, step_ms=step_ms, per_second=False)
    _with_gap_aware(time_major, True, out, partial(_end_difference, window=window), gap_aware)


def _rate(time_major: np.ndarray, window: int, step_ms: int, out: np.ndarray) -> None:
    width = len(time_major)
    seconds = (np.arange(width) - _starts(width, window)) * (step_ms / 1000)

    def dense(values: np.ndarray, gained: np.ndarray) -> None:
        _end_difference(values, gained, window)
        gained[seconds == 0] = np.nan  # a window of one instant: no time to divide by
        np.divide(gained, np.where(seconds > 0, seconds, 1)[:, None], out=gained)

    gap_aware = partial(_gap_aware_increase, window=window, step_ms=step_ms, per_second=True)
    _with_gap_aware(time_major, True, out, dense, gap_aware)


def _moving_sum(time_major: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """The sum of each window's values (NaN where it has none) and their count."""
    missing = np.isnan(time_major)
    running_total = prefix_sum(np.where(missing, 0.0, time_major))
    running_seen = prefix_sum((~missing).astype(np.int64))
    total, seen = running_total.copy(), running_seen.copy()
    total[window:] -= running_total[:-window]
    seen[window:] -= running_seen[:-window]
    return np.where(seen > 0, total, np.nan), seen


def _mean(time_major: np.ndarray, window: int, step_ms: int, out: np.ndarray) -> None:
    total, seen = _moving_sum(time_major, window)
    out[:] = np.where(seen > 0, total / np.where(seen > 0, seen, 1), np.nan)


def _sum(time_major: np.ndarray, window: int, step_ms: int, out: np.ndarray) -> None:
    out[:] = _moving_sum(time_major, window)[0]


def _count(time_major: np.ndarray, window: int, step_ms: int, out: np.ndarray) -> None:
    out[:] = _moving_sum(time_major, window)[1]


# name -> f(values [instants, series], window in buckets, step in ms, out [instants, series])
PrefixWindow = Callable[[np.ndarray, int, int, np.ndarray], None]
PREFIX_WINDOWS: dict[str, PrefixWindow] = {
    "delta": _delta,
    "increase": _increase,
    "rate": _rate,
    "mean": _mean,
    "sum": _sum,
    "count": _count,
}
