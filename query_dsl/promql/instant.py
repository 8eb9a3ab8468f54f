"""An instant selector's reading (``x``, ``x offset 5m``, ``x @ t``): at each evaluation time
``t``, each series' latest sample with its own time in ``[t - lookback, t]``, none if that
sample is a stale marker (the series ended). The samples come untrimmed: one before the
lookback or after the time is never the one picked.

Series with a sample in every bucket (what a fetch of series scraped throughout reads) take
whole rows of the time-major arrays: the bucket that holds the time, or the one before where
a sample's own time lies after it; when both lie within the lookback at every time, nothing
is compared per cell. Others take a running maximum of the buckets with a sample.
"""

from __future__ import annotations

import numpy as np

from query_dsl.promql.ranges import rows_at, times_at
from query_dsl.promql.selection import Samples
from query_dsl.promql.values import present

__all__ = ["LOOKBACK_MS", "latest_at"]

LOOKBACK_MS = 300_000  # how far back an instant selector looks for a sample (Prometheus's default)


def latest_at(
    samples: Samples, at: np.ndarray, lookback_ms: int, with_times: bool, *, view: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """Each series' latest sample at each time of ``at`` (ascending) within ``lookback_ms``,
    ``[series, at]`` (NaN: none), and with ``with_times`` (else maybe None) that sample's
    time (ms, float). With ``view``, the values may be a view of ``samples``' (consecutive
    whole buckets, as a range query at the buckets' step reads them): for a caller that only
    reads them."""
    values, axis = samples.values, samples.times
    if not len(values) or not len(axis):
        empty = np.zeros((len(values), len(at)))
        empty[:] = np.nan
        return empty, empty.copy()
    own = samples.sample_times()
    stale = samples.stale
    lead = 0 if samples.full else _dense_from(values, samples.gaps) if stale is None else None
    if lead is not None:  # a sample in every bucket from the first that has any
        out, when = _latest_dense(
            values[:, lead:].T, own[:, lead:].T, axis[lead:], at, lookback_ms, with_times, view
        )
        return out.T, None if when is None else when.T
    sampled = present(values) if stale is None else present(values) | stale
    latest = np.maximum.accumulate(np.where(sampled, np.arange(len(axis))[None, :], -1), axis=1)
    column = np.searchsorted(axis, at, side="right") - 1
    picked = latest[:, np.maximum(column, 0)]
    picked[:, column < 0] = -1
    rows = np.arange(len(values))[:, None]
    # a sample of the bucket that holds the time may lie after it: take the one before
    after = (picked >= 0) & (own[rows, np.maximum(picked, 0)] > at[None, :])
    earlier = np.where(picked > 0, latest[rows, np.maximum(picked - 1, 0)], -1)
    picked = np.where(after, earlier, picked)
    when = own[rows, np.maximum(picked, 0)]
    ok = (picked >= 0) & (when >= at[None, :] - lookback_ms)
    if stale is not None:  # the latest sample is a stale marker: the series has ended
        ok &= ~stale[rows, np.maximum(picked, 0)]
    return np.where(ok, values[rows, np.maximum(picked, 0)], np.nan), np.where(ok, when, np.nan)


def _dense_from(values: np.ndarray, gaps: np.ndarray | None) -> int | None:
    """The first bucket of ``values`` (``[series, buckets]``, NaN in the columns ``gaps``
    only, when known) where any series has a sample if from there on every series has one
    in every bucket, else None. The buckets before are empty for every series (a query
    reaching before the data), so they hold nothing to read."""
    if gaps is not None:  # then they must be the first buckets, each empty in every series
        lead = len(gaps)
        if not lead or (gaps[-1] == lead - 1 and lead < values.shape[1] and np.isnan(values[:, :lead]).all()):
            return lead
        return None
    nan = np.isnan(values)
    if not nan.any():
        return 0
    lead = int(np.argmin(nan.all(axis=0)))
    return lead if lead and not nan[:, lead:].any() else None


def _latest_dense(
    values: np.ndarray,
    own: np.ndarray,
    axis: np.ndarray,
    at: np.ndarray,
    lookback_ms: int,
    with_times: bool = True,
    view: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """An instant selector over time-major series with a sample in every bucket and no stale
    marker: at each time of ``at`` (ascending), each series' latest sample at or before it
    within ``lookback_ms`` (``[at, series]``, NaN: none) and, ``with_times``, that sample's
    time (float ms). The sample is the bucket's that holds the time, or the one before where
    its own time lies after it: whole rows gathered, not a running maximum over every bucket."""
    column = np.searchsorted(axis, at, side="right") - 1
    if not with_times:
        fast = _latest_rows(values, own, axis, at, column, lookback_ms, view)
        if fast is not None:
            return fast, None
    rows = np.maximum(column, 0)[:, None]
    after = own[rows[:, 0]] > at[:, None]
    if after.any():
        rows = rows - after
    ok = (column >= 0)[:, None] & (rows >= 0)
    rows = np.maximum(rows, 0)
    when = times_at(own, rows)
    ok = ok & (when >= (at - lookback_ms)[:, None])
    out = np.where(ok, rows_at(values, rows), np.nan)
    if not with_times:
        return out, None
    return out, np.broadcast_to(np.where(ok, when, np.nan), out.shape)


def _latest_rows(
    values: np.ndarray,
    own: np.ndarray,
    axis: np.ndarray,
    at: np.ndarray,
    column: np.ndarray,
    lookback_ms: int,
    view: bool,
) -> np.ndarray | None:
    """:func:`_latest_dense`'s values when no cell needs a comparison: every time lies in a
    bucket (``column``, the one that holds it) and that bucket's start and the one before's
    lie within the lookback, so each series' sample is one of those two and none is too old;
    a sample after the time in the first bucket (none before it) needs one, so None then."""
    if not len(at) or column[0] < 0:
        return None
    # ``at`` ascends, so does ``column``: where it is 0 is a prefix, and past it none is
    before = axis.take(column - 1) if column[0] else axis.take(np.maximum(column - 1, 0))
    if (at - before).max() > lookback_ms:
        return None
    if own.strides[1] == 0:  # stride 0: at the buckets' starts
        return _rows(values, column, view)
    after = own.take(column, axis=0) > at[:, None]
    if not after.any():
        return _rows(values, column, view)
    if not column[0] and after[: int(np.searchsorted(column, 1))].any():
        return None
    # the bucket before where the sample lies after the time (column 0 never: checked)
    return np.where(after, values.take(column - 1, axis=0), values.take(column, axis=0))


def _rows(values: np.ndarray, column: np.ndarray, view: bool) -> np.ndarray:
    """The rows ``column`` (ascending) of ``values``: with ``view``, a view where they
    follow each other (no copy of a block's every sample), else a copy."""
    if view and column[-1] - column[0] == len(column) - 1:  # ascending, so consecutive
        return values[column[0] : column[-1] + 1]
    rows: np.ndarray = values.take(column, axis=0)
    return rows
