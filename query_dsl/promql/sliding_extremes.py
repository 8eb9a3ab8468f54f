"""``min_over_time`` and ``max_over_time`` of a few series over many long windows, by a
sparse table: the extreme of every run of ``2^k`` samples, for each ``k`` up to the widest
window, so that a window's extreme is that of two overlapping runs, plus its edge rows whose
own times put them in it (:func:`query_dsl.promql.running_sums.edge_rows`). Cutting every
window out and reducing it read [series x windows x width] cells eight times (4-5 ms for
an hour's windows of a dozen series at 61 steps); the table is [levels x series x times].

NaN samples are passed over unless every sample of the window is NaN (``np.fmin``'s rule,
and ``np.nanmin``'s, which reduced the windows): the answer is then a NaN sample; a window
without a sample has no output.
"""

from __future__ import annotations

import numpy as np

from query_dsl.promql.running_sums import edge_inside, edge_rows, window_counts
from query_dsl.promql.selection import Samples
from query_dsl.promql.values import present, settle

__all__ = ["EXTREMES", "sliding_extremes"]

EXTREMES = {"min_over_time": np.fmin, "max_over_time": np.fmax}


def sliding_extremes(
    name: str, samples: Samples, ends: np.ndarray, range_ms: int, room_cells: int
) -> np.ndarray | None:
    """``name`` (one of :data:`EXTREMES`) over each window ``[end - range_ms, end]`` of
    ``ends``: ``[series, ends]``; None when the table would take more than ``room_cells``."""
    ufunc = EXTREMES[name]
    values = samples.values
    series, width = values.shape
    low, high, edges = edge_rows(samples, ends, range_ms)
    length = np.maximum(high - low, 0)
    levels = max(int(length.max(initial=1)).bit_length(), 1)
    if levels * series * width > room_cells or not width:
        return None
    table = np.empty((levels, series, width))
    table[0] = values
    for level in range(1, levels):
        span = 1 << (level - 1)
        ufunc(
            table[level - 1, :, : width - span],
            table[level - 1, :, span:],
            out=table[level, :, : width - span],
        )
        table[level, :, width - span :] = table[level - 1, :, width - span :]
    level = np.log2(np.maximum(length, 1)).astype(np.int64)
    start = np.minimum(low, width - 1)
    other = np.clip(high - (1 << level), 0, width - 1)
    core = ufunc(table[level, :, start], table[level, :, other])  # [windows, series]
    core[length == 0] = np.nan
    sampled = present(values)
    if edges.shape[1]:
        inside = edge_inside(samples, sampled, edges, ends, range_ms)  # [series, windows, edges]
        at_edges = np.where(inside, values[:, np.maximum(edges, 0)], np.nan)
        core = ufunc(core, ufunc.reduce(at_edges, axis=2).T)
    counts = window_counts(samples, sampled, ends, range_ms)
    return settle(core.T, counts == 0)
