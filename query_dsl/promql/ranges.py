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

import numpy as np

from query_dsl.promql.over_time import RANGE_FUNCTIONS, down, previous_in_time
from query_dsl.promql.selection import Samples
from query_dsl.promql.values import present as is_sample
from query_dsl.promql.values import settle

__all__ = ["RANGE_NAMES", "VECTORIZED", "evaluate_range", "range_temporaries", "rate_blocks"]


def _cells(rows: np.ndarray, series: int) -> np.ndarray:
    """Flat indices of ``[rows[e, s], s]`` in a C-contiguous ``[times, series]`` array."""
    return rows * series + np.arange(series)


def _take(array: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """``array``'s cells at ``_cells`` indices (a 1-D take: the cheapest gather numpy has)."""
    return array.reshape(-1).take(cells)


def _bounds(
    samples: Samples, ends: np.ndarray, range_ms: int, dense: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every window ``[end - range_ms, end]`` and series: the row of its first and of
    its last sample in the window (``[ends, series]``, rows of the time-major samples), and
    whether it has one at all. Time-major throughout: a window's cells of every series lie
    in a few contiguous rows, where the series-major gathers walked memory a row of
    series apart. ``dense``: every series has a sample in every bucket (no fills needed)."""
    values, axis = np.ascontiguousarray(samples.values.T), samples.times
    width, series = values.shape
    exact = samples.exact is not None
    slack = samples.step_ms if exact else 0  # with own times a sample lies up to a step after its bucket
    low = np.searchsorted(axis, ends - range_ms - slack, side="right" if exact else "left")
    high = np.searchsorted(axis, ends, side="right")
    if dense:  # a sample in every bucket: each window's rows are the same for every series
        first = np.repeat(np.minimum(low, width)[:, None], series, axis=1)
        last = np.repeat((high - 1)[:, None], series, axis=1)
        if exact:
            own = np.ascontiguousarray(samples.sample_times().T)
            early = (first < width) & (own[np.minimum(low, width - 1)] < (ends - range_ms)[:, None])
            first += early
            late = (last >= 0) & (own[np.maximum(high - 1, 0)] > ends[:, None])
            last -= late
    else:
        present = is_sample(values)
        rows = np.arange(width)[:, None]
        latest = down(np.maximum, np.where(present, rows, -1))
        following = down(np.minimum, np.where(present, rows, width), reverse=True)
        following = np.concatenate([following, np.full((1, series), width)], axis=0)  # past the end
        first = following[np.minimum(low, width)]
        last = np.where(high[:, None] > 0, latest[np.maximum(high - 1, 0)], -1)
        if exact:
            own = np.ascontiguousarray(samples.sample_times().T)
            at_first = _take(own, _cells(np.minimum(first, width - 1), series))
            early = (first < width) & (at_first < (ends - range_ms)[:, None])
            first = np.where(early, _take(following, _cells(np.minimum(first + 1, width), series)), first)
            late = (last >= 0) & (_take(own, _cells(np.maximum(last, 0), series)) > ends[:, None])
            before = np.where(last > 0, _take(latest, _cells(np.maximum(last - 1, 0), series)), -1)
            last = np.where(late, before, last)
    valid = (first < width) & (last >= 0) & (first <= last)
    return np.minimum(first, width - 1), np.maximum(last, 0), valid


def _rates(
    name: str, samples: Samples, ends: np.ndarray, range_ms: int, dense: bool | None = None
) -> np.ndarray:
    """``rate``, ``increase``, ``delta``, ``irate``, ``idelta`` for every window at once
    (``[series, ends]``), from the first and last sample of each window and prefix sums of
    the counter resets: no loop over the evaluation times. Computed time-major (see
    ``_bounds``); the answer is a transposed view. ``dense`` (found when None): every series
    has a sample in every bucket, which spares the fills and counts that gaps need."""
    values = np.ascontiguousarray(samples.values.T)
    own = np.ascontiguousarray(samples.sample_times().T)
    series = values.shape[1]
    present = is_sample(values)
    if dense is None:
        dense = bool(present.all())
    first_rows, last_rows, valid = _bounds(samples, ends, range_ms, dense)
    first, last = _cells(first_rows, series), _cells(last_rows, series)
    if dense:
        samples_in = last_rows - first_rows + 1
    else:
        count = down(np.add, present.astype(np.int64))
        samples_in = _take(count, last) - _take(count, first) + 1
    last_v, last_t = _take(values, last), _take(own, last).astype(np.float64)
    with np.errstate(all="ignore"):
        if name in ("irate", "idelta"):
            rows = np.arange(len(values))[:, None]
            latest = down(np.maximum, np.where(present, rows, -1))
            before = np.where(last_rows > 0, _take(latest, _cells(np.maximum(last_rows - 1, 0), series)), -1)
            enough = valid & (before >= first_rows)
            previous_cells = _cells(np.maximum(before, 0), series)
            prev_v = _take(values, previous_cells)
            if name == "idelta":
                return settle(last_v - prev_v, ~enough).T
            increase = np.where(last_v < prev_v, last_v, last_v - prev_v)
            seconds = (last_t - _take(own, previous_cells)) / 1000
            return settle(increase / seconds, ~(enough & (seconds > 0))).T
        first_v, first_t = _take(values, first), _take(own, first).astype(np.float64)
        result = last_v - first_v
        is_counter = name != "delta"
        if is_counter:
            previous = (
                np.concatenate([np.full((1, series), np.nan), values[:-1]])
                if dense
                else previous_in_time(values, present)[0]
            )
            drops = down(np.add, np.where(present & (values < previous), previous, 0.0))
            result = result + _take(drops, last) - _take(drops, first)
        end = ends[:, None].astype(np.float64)
        to_start = (first_t - (end - range_ms)) / 1000
        to_end = (end - last_t) / 1000
        sampled = (last_t - first_t) / 1000
        average = sampled / (samples_in - 1)
        if is_counter:
            to_zero = sampled * (first_v / result)
            shorter = (result > 0) & (first_v >= 0) & (to_zero < to_start)
            to_start = np.where(shorter, to_zero, to_start)
        threshold = average * 1.1
        interval = sampled + np.where(to_start < threshold, to_start, average / 2)
        interval += np.where(to_end < threshold, to_end, average / 2)
        factor = interval / sampled
        if name == "rate":
            factor /= range_ms / 1000
        return settle(result * factor, ~(valid & (samples_in >= 2))).T


VECTORIZED = frozenset({"rate", "increase", "delta", "irate", "idelta"})
_BLOCK = 4096  # series at a time: a window's temporaries of a block fit a core's cache
_BLOCK_CELLS = 1 << 19  # and at most this many series x evaluation times: the temporaries' bound
_STACKED_CELLS = 1 << 16  # windows stacked into one call: the temporaries stay in a core's cache
_WINDOW_COPIES = 5  # a range function's copies per cell of the samples it is given
RANGE_NAMES = frozenset(RANGE_FUNCTIONS) | VECTORIZED  # every function of a range vector


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
        yield start, _rates(name, part, ends, range_ms)


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
    values, axis = samples.values, samples.times
    out = np.full((values.shape[0], len(ends)), np.nan)
    exact = samples.exact is not None
    # with own times, a sample lies up to a step after its bucket's start
    slack = samples.step_ms if exact else 0
    low = np.searchsorted(axis, ends - range_ms - slack, side="right" if exact else "left")
    high = np.searchsorted(axis, ends, side="right")
    # one window per distinct (samples, arguments): without own times, the same answer
    windows: dict[tuple[int, ...] | tuple[float, ...], list[int]] = {}
    for column in np.flatnonzero(high > low).tolist() if values.shape[0] else []:
        args = tuple(params[:, column].tolist())
        key = (column,) if exact else (int(low[column]), int(high[column]), *args)
        windows.setdefault(key, []).append(column)
    by_args: dict[tuple[float, ...], list[list[int]]] = {}
    for columns in windows.values():
        by_args.setdefault(tuple(params[:, columns[0]].tolist()), []).append(columns)
    for args, groups in by_args.items():
        first = np.array([columns[0] for columns in groups])
        width = int((high[first] - low[first]).max())
        size = max(1, _STACKED_CELLS // max(values.shape[0] * width, 1))
        for start in range(0, len(first), size):
            check()
            chosen = first[start : start + size]
            answer = _stacked(name, samples, low[chosen], high[chosen], ends[chosen], range_ms, args)
            for index, columns in enumerate(groups[start : start + size]):
                out[:, columns] = answer[:, index : index + 1]
    return out


def _stacked(
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
    inside = index < high[:, None]
    index = np.minimum(index, values.shape[1] - 1)
    window, window_times = values[:, index], times[:, index]  # [series, windows, width]
    if samples.exact is not None:
        inside = inside & (window_times >= (ends - range_ms)[:, None]) & (window_times <= ends[:, None])
    window = np.where(inside, window, np.nan)
    row_ends = np.tile(ends.astype(np.int64), series)
    answer = RANGE_FUNCTIONS[name](
        window.reshape(series * count, width),
        window_times.reshape(series * count, width),
        row_ends,
        range_ms,
        args,
    )
    return answer.reshape(series, count)
