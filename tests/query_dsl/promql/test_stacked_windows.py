"""The stacked windows' path of a range function (query_dsl/promql/ranges.py's grouping,
stacked.py's rows, over_time.py's regression and variance written with one pass per
temporary) answers what the path before it did, bit for bit: the code of that path is kept
here as the reference, run on random series with gaps, NaN samples, infinities, constant
stretches, own sample times or none, arguments that vary (NaN, -0.0) and evaluation times
closer than the buckets."""

from __future__ import annotations

import numpy as np
import pytest

from query_dsl.promql.over_time import RANGE_FUNCTIONS
from query_dsl.promql.ranges import _STACKED_CELLS, _window_rows, evaluate_range
from query_dsl.promql.running_sums import edge_rows
from query_dsl.promql.selection import Samples
from query_dsl.promql.values import NAN_VALUE, settle
from query_dsl.promql.values import present as is_sample
from query_dsl.series_table import SeriesTable

STEP = 5_000
STACKED = [
    "deriv",
    "predict_linear",
    "stddev_over_time",
    "stdvar_over_time",
    "quantile_over_time",
    "holt_winters",
]


def _old_regression(
    values: np.ndarray, times: np.ndarray, origin: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    present = is_sample(values)
    count = present.sum(axis=1)
    first = np.argmax(present, axis=1)
    rows = np.arange(len(values))
    x = np.where(present, (times - origin[:, None]) / 1000, 0.0)
    y = np.where(present, values, 0.0)
    with np.errstate(all="ignore"):
        n = count.astype(np.float64)
        sum_x, sum_y = x.sum(axis=1), y.sum(axis=1)
        cov = (x * y).sum(axis=1) - sum_x * sum_y / n
        var = (x * x).sum(axis=1) - sum_x * sum_x / n
        slope = cov / var
        intercept = sum_y / n - slope * sum_x / n
        first_v = values[rows, first]
        constant = (np.where(present, values, first_v[:, None]) == first_v[:, None]).all(axis=1)
        slope = np.where(constant, np.where(np.isinf(first_v), np.nan, 0.0), slope)
        intercept = np.where(constant, np.where(np.isinf(first_v), np.nan, first_v), intercept)
    missing = count < 2
    return settle(slope, missing), settle(intercept, missing)


def _old_deriv(
    values: np.ndarray, times: np.ndarray, ends: np.ndarray, _r: int, _a: tuple[float, ...]
) -> np.ndarray:
    first = np.argmax(is_sample(values), axis=1)
    return _old_regression(values, times, times[np.arange(len(values)), first])[0]


def _old_predict(
    values: np.ndarray, times: np.ndarray, ends: np.ndarray, _r: int, a: tuple[float, ...]
) -> np.ndarray:
    slope, intercept = _old_regression(values, times, ends)
    return settle(slope * a[0] + intercept, ~is_sample(slope))


def _old_variance(root: bool) -> object:
    def run(
        values: np.ndarray, times: np.ndarray, ends: np.ndarray, _r: int, _a: tuple[float, ...]
    ) -> np.ndarray:
        present = is_sample(values)
        with np.errstate(all="ignore"):
            count = present.sum(axis=1).astype(np.float64)
            mean = np.where(present, values, 0.0).sum(axis=1) / count
            variance = np.where(present, (values - mean[:, None]) ** 2, 0.0).sum(axis=1) / count
        return settle(np.sqrt(variance) if root else variance, ~present.any(axis=1))

    return run


OLD_FUNCTIONS = {
    **RANGE_FUNCTIONS,
    "deriv": _old_deriv,
    "predict_linear": _old_predict,
    "stddev_over_time": _old_variance(True),
    "stdvar_over_time": _old_variance(False),
}


def _old_stacked(
    name: str,
    samples: Samples,
    low: np.ndarray,
    high: np.ndarray,
    ends: np.ndarray,
    range_ms: int,
    args: tuple,
) -> np.ndarray:
    values, times = samples.values, samples.sample_times()
    series, count = values.shape[0], len(low)
    function = OLD_FUNCTIONS[name]
    if count == 1:
        lo, hi, end = int(low[0]), int(high[0]), int(ends[0])
        window, window_times = values[:, lo:hi], times[:, lo:hi]
        if samples.exact is not None:
            inside = (window_times >= end - range_ms) & (window_times <= end)
            window = np.where(inside, window, np.nan)
        return function(window, window_times, np.full(series, end, dtype=np.int64), range_ms, args)[:, None]
    width = int((high - low).max())
    index = low[:, None] + np.arange(width)
    padding = index >= high[:, None]
    index = np.minimum(index, values.shape[1] - 1)
    window = values[:, index]
    window[:, padding] = np.nan
    if samples.exact is not None:
        _low, _high, edges = edge_rows(samples, ends, range_ms)
        if edges.shape[1]:
            own = samples.exact[:, np.maximum(edges, 0)]
            outside = (edges >= 0) & ((own < (ends - range_ms)[:, None]) | (own > ends[:, None]))
            at_series, at_window, at_edge = np.nonzero(outside)
            window[at_series, at_window, edges[at_window, at_edge] - low[at_window]] = np.nan
    rows = series * count
    window_times = times[:, index].reshape(rows, width)
    row_ends = np.tile(ends.astype(np.int64), series)
    return function(window.reshape(rows, width), window_times, row_ends, range_ms, args).reshape(
        series, count
    )


def _old_evaluate(
    name: str, samples: Samples, ends: np.ndarray, range_ms: int, params: np.ndarray
) -> np.ndarray:
    values = samples.values
    out = np.full((values.shape[0], len(ends)), np.nan)
    exact = samples.exact is not None
    low, high = _window_rows(samples.times, ends, range_ms, exact, samples.step_ms)
    windows: dict[tuple, list[int]] = {}
    for column in np.flatnonzero(high > low).tolist() if values.shape[0] else []:
        args = tuple(params[:, column].tolist())
        key = (column,) if exact else (int(low[column]), int(high[column]), *args)
        windows.setdefault(key, []).append(column)
    by_args: dict[tuple, list[list[int]]] = {}
    for columns in windows.values():
        by_args.setdefault(tuple(params[:, columns[0]].tolist()), []).append(columns)
    for args, groups in by_args.items():
        first = np.array([columns[0] for columns in groups])
        width = int((high[first] - low[first]).max())
        size = max(1, _STACKED_CELLS // max(values.shape[0] * width, 1))
        for start in range(0, len(first), size):
            chosen = first[start : start + size]
            answer = _old_stacked(name, samples, low[chosen], high[chosen], ends[chosen], range_ms, args)
            for index, columns in enumerate(groups[start : start + size]):
                out[:, columns] = answer[:, index : index + 1]
    return out


def _samples(rng: np.random.Generator, series: int, own_times: bool) -> Samples:
    width = 1_300
    axis = 1_700_000_000_000 + np.arange(width) * STEP
    kind = rng.integers(0, 3)
    if kind == 0:  # a gauge of bytes: large integers
        values = np.round(4e10 + np.cumsum(rng.integers(0, 4096, (series, width)), axis=1)).astype(np.float64)
    elif kind == 1:  # fractions
        values = rng.normal(0, 1e3, (series, width))
    else:  # steps: constant stretches
        values = np.repeat(rng.integers(-3, 4, (series, width // 100 + 1)), 100, axis=1)[:, :width] * 1.5
    values[rng.random((series, width)) < rng.choice([0.0, 0.05, 0.4])] = np.nan  # gaps
    values[:, rng.integers(0, width) : rng.integers(0, width)] = np.nan
    special = rng.random((series, width))
    values[special < 0.002] = NAN_VALUE
    values[(special > 0.998) & (rng.random() < 0.3)] = np.inf
    values[special > 0.9995] = 0.0
    values[special > 0.9998] = -0.0
    exact = axis[None, :] + rng.integers(0, STEP, (series, width)) if own_times else None
    if rng.random() < 0.7:  # time-major, as a fetch lays them out: a row's sum adds in another order
        values = np.ascontiguousarray(values.T).T
        exact = None if exact is None else np.ascontiguousarray(exact.T).T
    table = SeriesTable.from_lists(["x"] * series, [{"i": str(i)} for i in range(series)])
    return Samples(table, axis, values, STEP, exact)


def _params(name: str, rng: np.random.Generator, count: int) -> np.ndarray:
    if name == "holt_winters":
        return np.full((2, count), 0.5)
    if name not in ("quantile_over_time", "predict_linear"):
        return np.zeros((0, count))
    choice = rng.integers(0, 3)
    if choice == 0:
        return np.full((1, count), rng.choice([0.3, 0.5, 1.0, -0.5, 600.0]))
    cycle = np.array([0.0, -0.0, 0.25, np.nan, 0.9])
    return cycle[np.arange(count) % (2 if choice == 1 else 5)][None, :]


@pytest.mark.parametrize("name", STACKED)
@pytest.mark.parametrize("seed", range(8))
def test_stacked_windows_answer_what_the_path_before_did(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed * 31 + len(name))
    own_times = seed % 3 != 2
    samples = _samples(rng, int(rng.choice([1, 3, 12, 40])), own_times)
    ranges = [1_000, 15_000, 61_000, 900_000] + ([] if name == "holt_winters" else [3_600_000])
    range_ms = int(rng.choice(ranges))
    every = int(rng.choice([2_500, 10_000, 60_000]))
    span = int(rng.choice([0, 300_000]))  # one window, or many (the last call may get one)
    ends = samples.times[-1] - np.arange(0, span + 1, every)[::-1] - int(rng.integers(0, STEP))
    params = _params(name, rng, len(ends))
    expected = _old_evaluate(name, samples, ends, range_ms, params)
    found = evaluate_range(name, samples, ends, range_ms, params, lambda: None)
    assert np.array_equal(found.view(np.uint64), expected.view(np.uint64))
