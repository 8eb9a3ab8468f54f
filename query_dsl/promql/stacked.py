"""A range function of :mod:`query_dsl.promql.over_time` over many windows of the same
series in one call (:func:`stacked_windows`): the path of :func:`query_dsl.promql.ranges.evaluate_range`
when no dense or few-series path applies."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from query_dsl.promql.over_time import RANGE_FUNCTIONS
from query_dsl.promql.running_sums import edge_rows
from query_dsl.promql.selection import Samples

__all__ = ["stacked_windows", "window_groups"]

_TIMED = frozenset({"deriv", "predict_linear"})  # the functions of RANGE_FUNCTIONS that read times


def _windows(array: np.ndarray, low: np.ndarray, width: int, fill: float | np.ndarray) -> np.ndarray:
    """``array[:, low + k]`` for ``k < width`` as ``[windows, series, width]``, C-contiguous
    (a row a window's samples of a series), ``fill`` past the array's end: row slices of a
    sliding view of the columns the windows read, not a gather of each cell."""
    series, length = array.shape
    start, stop = int(low.min()), int(low.max()) + width
    read = array[:, start : min(stop, length)]
    padded = np.empty((series, stop - start), dtype=array.dtype)
    padded[:, : read.shape[1]] = read
    padded[:, read.shape[1] :] = fill
    windows: np.ndarray = sliding_window_view(padded, width, axis=1).transpose(1, 0, 2)[low - start]
    return windows


def stacked_windows(
    name: str,
    samples: Samples,
    low: np.ndarray,
    high: np.ndarray,
    ends: np.ndarray,
    range_ms: int,
    args: tuple[float, ...],
) -> np.ndarray:
    """``name`` over the windows ``[low, high)`` of the time axis (ending at ``ends``) in one
    call: each series' window a row ``[windows * series, widest]`` (window-major), NaN-padded
    (no sample); the answer ``[series, windows]``. A dashboard's few series over many
    evaluation times cost one call, not one a time."""
    values, times = samples.values, samples.sample_times()
    series, count = values.shape[0], len(low)
    if count == 1:  # one window fills the call (many series): its samples in place
        lo, hi, end = int(low[0]), int(high[0]), int(ends[0])
        window, window_times = values[:, lo:hi], times[:, lo:hi]
        if samples.exact is not None:
            inside = (window_times >= end - range_ms) & (window_times <= end)
            window = np.where(inside, window, np.nan)
        row_ends = np.full(series, end, dtype=np.int64)
        return RANGE_FUNCTIONS[name](window, window_times, row_ends, range_ms, args)[:, None]
    width = int((high - low).max())
    window = _windows(values, low, width, np.nan)  # [windows, series, width], a copy
    short = (high - low) < width
    if short.any():
        window[short] = np.where(np.arange(width) >= (high - low)[short, None, None], np.nan, window[short])
    if samples.exact is not None:  # only the edge rows' own times can put a sample outside
        _low, _high, edges = edge_rows(samples, ends, range_ms)
        if edges.shape[1]:
            own = samples.exact[:, np.maximum(edges, 0)]  # [series, windows, edges]
            outside = (edges >= 0) & ((own < (ends - range_ms)[:, None]) | (own > ends[:, None]))
            at_series, at_window, at_edge = np.nonzero(outside)
            window[at_window, at_series, edges[at_window, at_edge] - low[at_window]] = np.nan
    rows = series * count
    # the samples' times only for the functions that read them (the regressions): zeros else
    if name in _TIMED:
        window_times = _windows(times, low, width, times[:, -1:]).reshape(rows, width)
    else:
        window_times = np.broadcast_to(np.int64(0), (rows, width))
    row_ends = np.repeat(ends.astype(np.int64), series)
    answer = RANGE_FUNCTIONS[name](window.reshape(rows, width), window_times, row_ends, range_ms, args)
    return answer.reshape(count, series).T


def _argument_keys(params: np.ndarray) -> np.ndarray:
    """``[columns, keys]``: equal rows where the arguments of two evaluation times are equal as
    Python's floats are (-0.0 is 0.0; a NaN equals nothing, so each keeps its own key)."""
    nan = np.isnan(params).any(axis=0)
    tag = np.where(nan, np.arange(params.shape[1]), -1)
    keys: np.ndarray = np.column_stack([np.where(np.isnan(params), 0.0, params + 0.0).T, tag])
    return keys


def _first_of_each(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The row of each distinct row of ``keys`` that comes first, in their order, and each
    row's number among them."""
    if not len(keys):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if (keys == keys[0]).all():  # the same arguments at every time (a literal): one group
        return np.zeros(1, dtype=np.int64), np.zeros(len(keys), dtype=np.int64)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)
    number = np.empty_like(order)
    number[order] = np.arange(len(order))
    return first[order], number[inverse.ravel()]


def window_groups(
    columns: np.ndarray, low: np.ndarray, high: np.ndarray, params: np.ndarray, exact: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The windows that evaluation times ``columns`` (their rows ``[low, high)``, their
    arguments ``params[:, columns]``) need computed: one per distinct (samples, arguments),
    as without own times two times may read the same rows. Answers each window's first
    column, each column's window, and each window's group of equal arguments (numbered in
    the order they first come), which one stacked call can share."""
    keys = _argument_keys(params[:, columns])
    if exact:
        firsts, window_of = columns, np.arange(len(columns))
    else:
        found, window_of = _first_of_each(np.column_stack([low[columns], high[columns], keys]))
        firsts = columns[found]
    _by_args, args_of = _first_of_each(keys[np.searchsorted(columns, firsts)])
    return firsts, window_of, args_of
