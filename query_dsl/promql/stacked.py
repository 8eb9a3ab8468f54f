"""A range function of :mod:`query_dsl.promql.over_time` over many windows of the same
series in one call (:func:`stacked_windows`): the path of :func:`query_dsl.promql.ranges.evaluate_range`
when no dense or few-series path applies."""

from __future__ import annotations

import numpy as np

from query_dsl.promql.over_time import RANGE_FUNCTIONS
from query_dsl.promql.running_sums import edge_rows
from query_dsl.promql.selection import Samples

__all__ = ["stacked_windows"]

_TIMED = frozenset({"deriv", "predict_linear"})  # the functions of RANGE_FUNCTIONS that read times


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
    call: each series' window a row ``[series * windows, widest]``, NaN-padded (no sample);
    the answer ``[series, windows]``. A dashboard's few series over many evaluation times
    cost one call, not one a time."""
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
    index = low[:, None] + np.arange(width)
    padding = index >= high[:, None]
    index = np.minimum(index, values.shape[1] - 1)
    window = values[:, index]  # [series, windows, width], a copy
    window[:, padding] = np.nan
    if samples.exact is not None:  # only the edge rows' own times can put a sample outside
        _low, _high, edges = edge_rows(samples, ends, range_ms)
        if edges.shape[1]:
            own = samples.exact[:, np.maximum(edges, 0)]  # [series, windows, edges]
            outside = (edges >= 0) & ((own < (ends - range_ms)[:, None]) | (own > ends[:, None]))
            at_series, at_window, at_edge = np.nonzero(outside)
            window[at_series, at_window, edges[at_window, at_edge] - low[at_window]] = np.nan
    rows = series * count
    # the samples' times only for the functions that read them (the regressions): zeros else
    zeros = np.broadcast_to(np.int64(0), (rows, width))
    window_times = times[:, index].reshape(rows, width) if name in _TIMED else zeros
    row_ends = np.tile(ends.astype(np.int64), series)
    answer = RANGE_FUNCTIONS[name](window.reshape(rows, width), window_times, row_ends, range_ms, args)
    return answer.reshape(series, count)
