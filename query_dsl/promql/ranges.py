"""Range vectors' windows (``rate(x[5m])``, ``avg_over_time(x[1h])``...): for each
evaluation time ``t``, the samples of each series in ``[t - range, t]`` (both ends closed,
as Prometheus 2 reads a range) give one value, or none: the functions of one window's
samples are :mod:`query_dsl.promql.over_time`'s; ``rate``, ``increase``, ``delta``,
``irate``, ``idelta`` are vectorised here over every window at once (NaN samples turn them
NaN). Prometheus's rules: ``rate``/``increase``/``delta`` extrapolate towards the window's
ends (not further than half an average interval past the first and last samples, and never
below zero for counters), counter resets add the value before the drop, ``irate``/``idelta``
use the last two samples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import numpy as np

from query_dsl.promql.dense_over_time import DENSE_OVER_TIME, over_time_rows
from query_dsl.promql.over_time import RANGE_FUNCTIONS, down, previous_in_time
from query_dsl.promql.running_sums import (
    PAIRS,
    RUNNING_SUMS,
    running_last,
    running_pairs,
    running_sums,
)
from query_dsl.promql.selection import Samples
from query_dsl.promql.sliding_extremes import EXTREMES, sliding_extremes
from query_dsl.promql.stacked import stacked_windows, window_groups
from query_dsl.promql.values import present as is_sample
from query_dsl.promql.values import settle

__all__ = [
    "RANGE_NAMES",
    "VECTORIZED",
    "evaluate_range",
    "range_temporaries",
    "rate_blocks",
    "rows_at",
    "times_at",
]


def rows_at(array: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``array[rows[e, s], s]`` of a time-major ``[times, series]`` array: ``rows`` is
    ``[ends, series]``, or ``[ends, 1]`` where every series reads the same row (a gather of
    whole rows, the cheapest there is)."""
    gathered: np.ndarray
    if rows.shape[1] == 1:
        gathered = array.take(rows[:, 0], axis=0)
    elif array.flags.c_contiguous:  # a 1-D take: the cheapest gather numpy has
        gathered = array.reshape(-1).take(rows * array.shape[1] + np.arange(array.shape[1]))
    else:
        gathered = np.take_along_axis(array, rows, axis=0)
    return gathered


Rows = tuple[np.ndarray, np.ndarray]


def times_at(own: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``_at`` of the samples' times, as float64: ``[ends, 1]`` where every series' sample
    there has the same time (samples written together, or bucket times), so that what is
    computed from the times alone is computed once per window."""
    if rows.shape[1] == 1 and own.strides[1] == 0:  # bucket times: one per row
        return own[rows[:, 0], :1].astype(np.float64)
    times = rows_at(own, rows)
    if times.shape[1] > 1 and (times == times[:, :1]).all():
        times = times[:, :1]
    return times.astype(np.float64)


def _shared_rows(own: np.ndarray) -> np.ndarray:
    """Time-major own times ``[times, series]`` as ``[times, 1]`` where every series' sample
    of a row has the same time (samples written together: a scrape, a batch), so that a
    window's bounds and its extrapolation's intervals are computed once per window, not per
    series (one pass over the times against a gather and a compare per window)."""
    if own.shape[1] > 1 and (not own.strides[1] or (own == own[:, :1]).all()):  # stride 0: bucket times
        return own[:, :1]
    return own


def _window_rows(axis: np.ndarray, ends: np.ndarray, range_ms: int, exact: bool, step_ms: int) -> Rows:
    """The rows of the time axis each window ``[end - range_ms, end]`` may read: ``[low, high)``."""
    slack = step_ms if exact else 0  # with own times a sample lies up to a step after its bucket
    low = np.searchsorted(axis, ends - range_ms - slack, side="right" if exact else "left")
    return low, np.searchsorted(axis, ends, side="right")


def _dense_bounds(
    own: np.ndarray, window: Rows, ends: np.ndarray, range_ms: int, exact: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_gappy_bounds`` for series with a sample in every bucket: a window's first and last
    rows are the same for every series (``[ends, 1]``) but where a sample's own time puts
    it outside the window (then ``[ends, series]``)."""
    low, high = window
    width = len(own)
    first, last = np.minimum(low, width)[:, None], (high - 1)[:, None]
    if exact:
        early = (first < width) & (own.take(np.minimum(low, width - 1), axis=0) < (ends - range_ms)[:, None])
        if early.any():
            first = first + early
        late = (last >= 0) & (own.take(np.maximum(high - 1, 0), axis=0) > ends[:, None])
        if late.any():
            last = last - late
    valid = (first < width) & (last >= 0) & (first <= last)
    return np.minimum(first, width - 1), np.maximum(last, 0), valid


def _gappy_bounds(
    values: np.ndarray, own: np.ndarray, window: Rows, ends: np.ndarray, range_ms: int, exact: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For every window and series (``values`` time-major, contiguous): the row of its first
    and of its last sample in the window (``[ends, series]``), whether it has one at all,
    and ``latest`` (each row's last sample at or before it)."""
    low, high = window
    width, series = values.shape
    present = is_sample(values)
    rows = np.arange(width)[:, None]
    latest = down(np.maximum, np.where(present, rows, -1))
    following = down(np.minimum, np.where(present, rows, width), reverse=True)
    following = np.concatenate([following, np.full((1, series), width)], axis=0)  # past the end
    first = following[np.minimum(low, width)]
    last = np.where(high[:, None] > 0, latest[np.maximum(high - 1, 0)], -1)
    if exact:
        at_first = rows_at(own, np.minimum(first, width - 1))
        early = (first < width) & (at_first < (ends - range_ms)[:, None])
        first = np.where(early, rows_at(following, np.minimum(first + 1, width)), first)
        late = (last >= 0) & (rows_at(own, np.maximum(last, 0)) > ends[:, None])
        before = np.where(last > 0, rows_at(latest, np.maximum(last - 1, 0)), -1)
        last = np.where(late, before, last)
    valid = (first < width) & (last >= 0) & (first <= last)
    return np.minimum(first, width - 1), np.maximum(last, 0), valid, latest


def _dense_gains(values: np.ndarray) -> Callable[[np.ndarray], np.ndarray] | None:
    """What counter resets add up to each row (the value before each drop, summed), as a
    gather of rows; None when no series drops. Only the series that drop are summed."""
    drops = values[1:] < values[:-1]
    columns = np.flatnonzero(drops.any(axis=0))
    if not len(columns):
        return None
    part = np.zeros((len(values), len(columns)))
    part[1:] = np.where(drops[:, columns], values[:-1, columns], 0.0)
    np.cumsum(part, axis=0, out=part)
    series = values.shape[1]

    def gains(rows: np.ndarray) -> np.ndarray:
        out = np.zeros((len(rows), series))
        out[:, columns] = rows_at(part, rows if rows.shape[1] == 1 else rows[:, columns])
        return out

    return gains


def _dense_rates(
    name: str, values: np.ndarray, own: np.ndarray, window: Rows, ends: np.ndarray, range_ms: int, exact: bool
) -> np.ndarray:
    """``_rates`` of time-major series that have a sample in every bucket: each window's
    first and last samples gathered as whole rows, resets summed only for the series that
    drop."""
    first, last, valid = _dense_bounds(own, window, ends, range_ms, exact)
    gains = _dense_gains(values) if name in ("rate", "increase") else None
    rows = (first, last, valid, last - first + 1, last - 1)
    return _from_rows(name, values, own, rows, gains, ends, range_ms)


def _gappy_rates(
    name: str, values: np.ndarray, own: np.ndarray, window: Rows, ends: np.ndarray, range_ms: int, exact: bool
) -> np.ndarray:
    """``_rates`` of time-major series with gaps (contiguous arrays): windows found by
    forward and backward fills, samples counted by prefix sums."""
    first, last, valid, latest = _gappy_bounds(values, own, window, ends, range_ms, exact)
    present = is_sample(values)
    count = down(np.add, present.astype(np.int64))
    samples_in = rows_at(count, last) - rows_at(count, first) + 1
    before = np.where(last > 0, rows_at(latest, np.maximum(last - 1, 0)), -1)
    gains = None
    if name in ("rate", "increase"):
        previous = previous_in_time(values, present)[0]
        drops = down(np.add, np.where(present & (values < previous), previous, 0.0))
        gains = partial(rows_at, drops)
    return _from_rows(name, values, own, (first, last, valid, samples_in, before), gains, ends, range_ms)


def _from_rows(
    name: str,
    values: np.ndarray,
    own: np.ndarray,
    rows: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    gains: Callable[[np.ndarray], np.ndarray] | None,
    ends: np.ndarray,
    range_ms: int,
) -> np.ndarray:
    """Prometheus's ``rate`` family from each window's first and last sample rows (and the
    one before the last, for ``irate``/``idelta``), its sample count and whether it has any:
    ``[ends, series]``."""
    first, last, valid, samples_in, before = rows
    last_v, last_t = rows_at(values, last), times_at(own, last)
    with np.errstate(all="ignore"):
        if name in ("irate", "idelta"):
            enough = valid & (before >= first)
            previous = np.maximum(before, 0)
            prev_v = rows_at(values, previous)
            if name == "idelta":
                return settle(last_v - prev_v, ~enough)
            increase = np.where(last_v < prev_v, last_v, last_v - prev_v)
            seconds = (last_t - times_at(own, previous)) / 1000
            return settle(increase / seconds, ~(enough & (seconds > 0)))
        first_v, first_t = rows_at(values, first), times_at(own, first)
        result = last_v - first_v
        is_counter = name != "delta"
        if gains is not None:
            result = result + gains(last) - gains(first)
        end = ends[:, None].astype(np.float64)
        to_start = (first_t - (end - range_ms)) / 1000
        to_end = (end - last_t) / 1000
        sampled = (last_t - first_t) / 1000
        average = sampled / (samples_in - 1)
        if is_counter and (to_start > 0).any():  # else no counter reaches 0 before its first sample
            to_zero = sampled * (first_v / result)
            shorter = (result > 0) & (first_v >= 0) & (to_zero < to_start)
            to_start = np.where(shorter, to_zero, to_start)
        threshold = average * 1.1
        interval = sampled + np.where(to_start < threshold, to_start, average / 2)
        interval += np.where(to_end < threshold, to_end, average / 2)
        factor = interval / sampled
        if name == "rate":
            factor /= range_ms / 1000
        return settle(result * factor, ~(valid & (samples_in >= 2)))


def _rates(name: str, samples: Samples, ends: np.ndarray, range_ms: int) -> np.ndarray:
    """``rate``, ``increase``, ``delta``, ``irate``, ``idelta`` for every window at once,
    ``[ends, series]`` (time-major): the series with a sample in every bucket read their
    windows' first and last rows (``_dense_rates``), the others take the way for gaps, on a
    copy of those series alone. No loop over the evaluation times: a window's cells of every
    series lie in a few contiguous rows of the time-major samples (the fetch's layout)."""
    values, own = samples.values.T, samples.sample_times().T
    exact = samples.exact is not None
    window = _window_rows(samples.times, ends, range_ms, exact, samples.step_ms)
    if not len(values):
        return np.full((len(ends), values.shape[1]), np.nan)
    gappy = np.isnan(values).any(axis=0)
    if not gappy.any():
        return _dense_rates(name, values, _shared_rows(own), window, ends, range_ms, exact)
    out = np.empty((len(ends), values.shape[1]))
    for columns, rates in ((~gappy, _dense_rates), (gappy, _gappy_rates)):
        picked = np.flatnonzero(columns)
        if len(picked):
            part, part_own = np.ascontiguousarray(values[:, picked]), np.ascontiguousarray(own[:, picked])
            out[:, picked] = rates(name, part, part_own, window, ends, range_ms, exact)
    return out


VECTORIZED = frozenset({"rate", "increase", "delta", "irate", "idelta"})
_BLOCK = 4096  # series at a time: a window's temporaries of a block fit a core's cache
_BLOCK_CELLS = 1 << 19  # and at most this many series x evaluation times: the temporaries' bound
_STACKED_CELLS = 1 << 16  # windows stacked into one call: the temporaries stay in a core's cache
_WINDOW_COPIES = 5  # a range function's copies per cell of the samples it is given
RANGE_NAMES = frozenset(RANGE_FUNCTIONS) | VECTORIZED  # every function of a range vector
_FEW_SERIES = 256  # a dashboard's series: their counts and sums over many windows by running sums


def block_series(steps: int) -> int:
    """How many series :func:`rate_blocks` computes at a time over ``steps`` evaluation times."""
    return max(1, min(_BLOCK, _BLOCK_CELLS // max(steps, 1)))


def range_temporaries(series: int, width: int, steps: int) -> int:
    """At most how many cells of temporaries :func:`evaluate_range` makes at once for a
    function of ``RANGE_FUNCTIONS`` (``series`` over a time axis of ``width``, ``steps``
    windows): one window's copies (it reads the samples in place) when one window fills a
    call, else the stacked windows' (gathered, padded, masked: twice as many)."""
    one_window = series * width * _WINDOW_COPIES
    return max(one_window, min(series * width * steps, _STACKED_CELLS) * 2 * _WINDOW_COPIES)


def rate_blocks(
    name: str, samples: Samples, ends: np.ndarray, range_ms: int, check: Callable[[], None]
) -> Iterator[tuple[int, np.ndarray]]:
    """``name`` (one of :data:`VECTORIZED`) over each window, a block of series at a time
    (temporaries that stay in cache): ``(first series, [series, ends])``, ``check`` called
    before each block."""
    size = block_series(len(ends))
    for start in range(0, len(samples.values), size):
        check()
        block = slice(start, start + size)
        own = None if samples.exact is None else samples.exact[block]
        part = Samples(samples.table, samples.times, samples.values[block], samples.step_ms, own)
        yield start, _rates(name, part, ends, range_ms).T


def evaluate_range(
    name: str,
    samples: Samples,
    ends: np.ndarray,
    range_ms: int,
    params: np.ndarray,
    check: Callable[[], None],
) -> np.ndarray:
    """``name`` over each window ``[end - range_ms, end]`` of ``ends``: ``[series, ends]``.
    ``params`` holds the function's scalar arguments per evaluation time ``[params, ends]``."""
    if name in VECTORIZED:
        out = np.empty((len(samples.values), len(ends)))
        for start, part in rate_blocks(name, samples, ends, range_ms, check):
            out[start : start + len(part)] = part
        return out
    dense = _dense_over_time(name, samples, ends, range_ms, check) if name in DENSE_OVER_TIME else None
    if dense is not None:
        return dense
    values, axis = samples.values, samples.times
    if len(ends) > 1 and len(values) <= _FEW_SERIES:
        room = range_temporaries(len(values), values.shape[1], len(ends))  # what the engine charged
        few: np.ndarray | None = None
        if name in RUNNING_SUMS:
            few = running_sums(name, samples, ends, range_ms)
        elif name in PAIRS:
            few = running_pairs(name, samples, ends, range_ms)
        elif name == "last_over_time":
            few = running_last(samples, ends, range_ms)
        elif name in EXTREMES:
            few = sliding_extremes(name, samples, ends, range_ms, room)
        if few is not None:
            return few
    out = np.full((values.shape[0], len(ends)), np.nan)
    exact = samples.exact is not None
    low, high = _window_rows(axis, ends, range_ms, exact, samples.step_ms)
    columns = np.flatnonzero(high > low) if values.shape[0] else np.zeros(0, dtype=np.int64)
    firsts, window_of, args_of = window_groups(columns, low, high, params, exact)
    for group in range(int(args_of.max(initial=-1)) + 1):
        chosen = np.flatnonzero(args_of == group)  # its windows, by their first column
        args = tuple(params[:, firsts[chosen[0]]].tolist())
        first = firsts[chosen]
        width = int((high[first] - low[first]).max())
        size = max(1, _STACKED_CELLS // max(values.shape[0] * width, 1))
        for start in range(0, len(first), size):
            check()
            picked = first[start : start + size]
            answer = stacked_windows(name, samples, low[picked], high[picked], ends[picked], range_ms, args)
            place = np.full(len(firsts), -1)
            place[chosen[start : start + size]] = np.arange(len(picked))
            at = place[window_of]
            out[:, columns[at >= 0]] = answer[:, at[at >= 0]]
    return out


def _dense_over_time(
    name: str, samples: Samples, ends: np.ndarray, range_ms: int, check: Callable[[], None]
) -> np.ndarray | None:
    """``name`` (one of ``DENSE_OVER_TIME``) over each window, time-major and a block of
    series at a time, where every series has a sample in every bucket and a bucket's samples
    share one time (``over_time_rows``); else None."""
    values = samples.values
    if not values.size or np.isnan(values).any():
        return None
    own = _shared_rows(samples.sample_times().T)
    if own.shape[1] != 1:
        return None
    exact = samples.exact is not None
    window = _window_rows(samples.times, ends, range_ms, exact, samples.step_ms)
    first, last, valid = (rows[:, 0] for rows in _dense_bounds(own, window, ends, range_ms, exact))
    out = np.empty((len(ends), len(values)))  # time-major, as the samples
    size = block_series(len(ends))
    for start in range(0, len(values), size):
        check()
        block = values[start : start + size].T
        out[:, start : start + size] = over_time_rows(name, block, first, last, valid)
    return out.T
