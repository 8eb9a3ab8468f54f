"""``count_over_time``, ``present_over_time``, ``sum_over_time`` and ``avg_over_time`` of a few
series over many long windows, by running sums: each window's count (and sum) is the
difference of two running totals along the time axis, plus the samples of the window's edge
rows whose own time decides whether they are in it. A range query of a dashboard (61
windows of an hour over a dozen series at a 5 s scrape) cut every window out and reduced it:
[series x windows x 720] cells copied and reduced five times, 4-5 ms of a query that
Prometheus answers in one; here [series x times] once.

Exact, never rounded differently from reducing each window: counts are integers, and sums
are taken in int64 only when every sample is an integer small enough that every partial sum
is exact in float64 too (a gauge of bytes, a counter of requests); otherwise (a fraction, an
infinity, a NaN sample) :func:`running_sums` answers None and the caller reduces the windows.
``last_over_time`` (:func:`running_last`) reads each window's latest sample from the latest
row with one; ``changes`` and ``resets`` (:func:`running_pairs`) count flagged pairs of consecutive
samples the same way, less the pair of each window's first sample, whose other half lies
before the window.
"""

from __future__ import annotations

import numpy as np

from query_dsl.promql.over_time import previous_in_time
from query_dsl.promql.selection import Samples
from query_dsl.promql.values import present, settle

__all__ = [
    "PAIRS",
    "RUNNING_SUMS",
    "edge_inside",
    "edge_rows",
    "running_last",
    "running_pairs",
    "running_sums",
    "window_counts",
]

PAIRS = frozenset({"changes", "resets"})

RUNNING_SUMS = frozenset({"count_over_time", "present_over_time", "sum_over_time", "avg_over_time"})
_EXACT = 2.0**53  # float64 holds every integer below this exactly


def _running(cells: np.ndarray) -> np.ndarray:
    """Running totals of ``cells`` (``[series, times]``, int64) with a leading 0 column:
    the total of columns ``[a, b)`` is ``out[:, b] - out[:, a]``."""
    out = np.zeros((cells.shape[0], cells.shape[1] + 1), dtype=np.int64)
    np.cumsum(cells, axis=1, out=out[:, 1:])
    return out


def _between(running: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Totals of columns ``[low, high)`` per window (``low <= high``): ``[series, windows]``."""
    totals: np.ndarray = running[:, high] - running[:, low]
    return totals


def edge_rows(samples: Samples, ends: np.ndarray, range_ms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each window's core rows ``[low, high)``, whose samples are in it when present, and
    its edge rows ``[windows, k]`` (-1: none), whose samples' own times decide: a sample lies
    in ``[bucket, bucket + step)``, so only a bucket that starts before the window or less
    than a step before its end can hold one outside it."""
    axis, step = samples.times, samples.step_ms
    start = ends - range_ms
    if samples.exact is None:  # a sample at its bucket's start: the rows are exact
        return (
            np.searchsorted(axis, start, side="left"),
            np.searchsorted(axis, ends, side="right"),
            np.empty((len(ends), 0), dtype=np.int64),
        )
    first = np.searchsorted(axis, start - step, side="right")
    low = np.searchsorted(axis, start, side="left")
    last = np.searchsorted(axis, ends, side="right")
    high = np.maximum(np.searchsorted(axis, ends - step, side="right"), low)
    before = low - first  # the edge rows before the core, then those after it
    count = before + np.maximum(last - high, 0)
    k = np.arange(int(count.max(initial=0)))
    edges = np.where(k < before[:, None], first[:, None] + k, high[:, None] + k - before[:, None])
    edges = np.where(k < count[:, None], edges, -1).astype(np.int64)
    return low, np.minimum(high, last), edges


def edge_inside(
    samples: Samples, sampled: np.ndarray, edges: np.ndarray, ends: np.ndarray, range_ms: int
) -> np.ndarray:
    """Whether each edge row (``edge_rows``'s) holds a sample inside its window:
    ``[series, windows, edges]``."""
    own = samples.sample_times()[:, np.maximum(edges, 0)]
    inside: np.ndarray = (own >= (ends - range_ms)[:, None]) & (own <= ends[:, None])
    inside &= sampled[:, np.maximum(edges, 0)] & (edges >= 0)
    return inside


def window_counts(samples: Samples, sampled: np.ndarray, ends: np.ndarray, range_ms: int) -> np.ndarray:
    """How many samples each window holds: ``[series, windows]``."""
    low, high, edges = edge_rows(samples, ends, range_ms)
    counts = _between(_running(sampled.astype(np.int64)), low, high)
    if edges.shape[1]:
        counts = counts + edge_inside(samples, sampled, edges, ends, range_ms).sum(axis=2)
    return counts


def _pair_flags(name: str, values: np.ndarray, sampled: np.ndarray) -> np.ndarray:
    """Per sample, whether it and the series' sample before it (anywhere) make a change
    (``changes``: they differ, not both NaN) or a reset (``resets``: it is lower)."""
    previous, found = previous_in_time(values.T, sampled.T)
    previous, found = previous.T, found.T
    if name == "changes":
        both_nan = np.isnan(values) & np.isnan(previous)
        flags: np.ndarray = sampled & found & (values != previous) & ~both_nan
    else:
        flags = sampled & (values < previous)  # NaN compares false
    return flags


def running_pairs(name: str, samples: Samples, ends: np.ndarray, range_ms: int) -> np.ndarray:
    """``changes`` or ``resets`` over each window: the pairs of consecutive samples flagged
    along the whole axis, less the first sample's in each window (its pair reaches outside)."""
    values = samples.values
    sampled = present(values)
    flags = _pair_flags(name, values, sampled)
    low, high, edges = edge_rows(samples, ends, range_ms)
    counts = _between(_running(sampled.astype(np.int64)), low, high)
    totals = _between(_running(flags.astype(np.int64)), low, high)
    width = values.shape[1]
    following = np.where(sampled, np.arange(width), width)  # each row's next sample: its row, or past the end
    np.minimum.accumulate(following[:, ::-1], axis=1, out=following[:, ::-1])
    ahead = np.append(following, np.full((len(values), 1), width), axis=1)[:, np.minimum(low, width)]
    first = np.where(ahead < high, ahead, width)  # [series, windows]: the first sample of the core
    if edges.shape[1]:
        inside = edge_inside(samples, sampled, edges, ends, range_ms)
        counts = counts + inside.sum(axis=2)
        totals = totals + (inside & flags[:, np.maximum(edges, 0)]).sum(axis=2)
        first = np.minimum(first, np.where(inside, edges, width).min(axis=2))
    lead = np.append(flags, np.zeros((len(values), 1), dtype=bool), axis=1)
    totals = totals - np.take_along_axis(lead, first, axis=1)
    return np.where(counts > 0, totals.astype(np.float64), np.nan)


def running_last(samples: Samples, ends: np.ndarray, range_ms: int) -> np.ndarray:
    """``last_over_time`` over each window: the latest sample at or before the core's last
    row, or the last of its edge rows inside it."""
    values = samples.values
    sampled = present(values)
    width = values.shape[1]
    low, high, edges = edge_rows(samples, ends, range_ms)
    latest = np.where(sampled, np.arange(width), -1)  # each row's latest sample: its row, or none
    np.maximum.accumulate(latest, axis=1, out=latest)
    behind = np.append(np.full((len(values), 1), -1), latest, axis=1)[:, np.minimum(high, width)]
    last = np.where(behind >= low, behind, -1)  # [series, windows]
    if edges.shape[1]:
        inside = edge_inside(samples, sampled, edges, ends, range_ms)
        last = np.maximum(last, np.where(inside, edges, -1).max(axis=2))
    answer = np.take_along_axis(values, np.maximum(last, 0), axis=1)
    return settle(answer, last < 0)


def running_sums(name: str, samples: Samples, ends: np.ndarray, range_ms: int) -> np.ndarray | None:
    """``name`` (one of :data:`RUNNING_SUMS`) over each window ``[end - range_ms, end]`` of
    ``ends``: ``[series, ends]``; None where a sum would not be exact (see the module doc)."""
    values = samples.values
    sampled = present(values)
    summing = name in ("sum_over_time", "avg_over_time")
    if summing:
        numbers = values[sampled]
        bound = _EXACT / max(values.shape[1], 1)
        if not (np.isfinite(numbers).all() and (numbers == np.trunc(numbers)).all()):
            return None
        if len(numbers) and np.abs(numbers).max() >= bound:
            return None
    low, high, edges = edge_rows(samples, ends, range_ms)
    counts = _between(_running(sampled.astype(np.int64)), low, high)
    integers = np.where(sampled, values, 0.0).astype(np.int64) if summing else None
    totals = _between(_running(integers), low, high) if integers is not None else None
    if edges.shape[1]:
        rows = np.maximum(edges, 0)
        inside = edge_inside(samples, sampled, edges, ends, range_ms)
        counts = counts + inside.sum(axis=2)
        if integers is not None and totals is not None:
            totals = totals + np.where(inside, integers[:, rows], 0).sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        if name == "count_over_time":
            out = counts.astype(np.float64)
        elif name == "present_over_time":
            out = np.ones(counts.shape)
        elif name == "sum_over_time":
            out = totals.astype(np.float64)  # type: ignore[union-attr]
        else:
            out = totals.astype(np.float64) / counts  # type: ignore[union-attr]
    return np.where(counts > 0, out, np.nan)
