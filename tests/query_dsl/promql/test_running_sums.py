"""count/present/sum/avg_over_time by running sums (query_dsl/promql/running_sums.py) answer
what reducing every window answers, bit for bit: own sample times at the windows' edges,
gaps, NaN samples, fractions (which go back to the windows)."""

from __future__ import annotations

import numpy as np
import pytest

from query_dsl.promql.over_time import RANGE_FUNCTIONS
from query_dsl.promql.ranges import evaluate_range
from query_dsl.promql.running_sums import RUNNING_SUMS, running_sums
from query_dsl.promql.selection import Samples
from query_dsl.promql.values import NAN_VALUE
from query_dsl.series_table import SeriesTable

STEP = 5_000


def _samples(seed: int, own_times: bool, integers: bool) -> Samples:
    rng = np.random.default_rng(seed)
    series, width = 7, 400
    axis = 1_700_000_000_000 + np.arange(width) * STEP
    values = rng.integers(-(10**9), 10**9, (series, width)).astype(np.float64)
    if not integers:
        values += rng.random((series, width))
    values[rng.random((series, width)) < 0.2] = np.nan  # gaps
    values[1, 100:300] = np.nan
    exact = axis[None, :] + rng.integers(0, STEP, (series, width)) if own_times else None
    table = SeriesTable.from_lists(["x"] * series, [{"i": str(i)} for i in range(series)])
    return Samples(table, axis, values, STEP, exact)


@pytest.mark.parametrize("name", sorted(RUNNING_SUMS))
@pytest.mark.parametrize(("own_times", "range_ms"), [(True, 3_600_000), (True, 61_000), (False, 900_000)])
def test_running_sums_answer_what_the_windows_do(name: str, own_times: bool, range_ms: int) -> None:
    samples = _samples(len(name) + range_ms, own_times, integers=True)
    ends = samples.times[-1] - np.arange(0, 600_000, 7_000)[::-1] - 1_234
    expected = np.concatenate(  # a window at a time: each reduced where it lies
        [
            evaluate_range(name, samples, ends[i : i + 1], range_ms, np.zeros((0, 1)), lambda: None)
            for i in range(len(ends))
        ],
        axis=1,
    )
    found = running_sums(name, samples, ends, range_ms)
    assert found is not None
    assert np.array_equal(found.view(np.uint64), expected.view(np.uint64))


def test_sums_that_would_round_go_back_to_the_windows() -> None:
    fractions = _samples(1, True, integers=False)
    ends = fractions.times[-1] - np.arange(0, 60_000, 10_000)
    assert running_sums("sum_over_time", fractions, ends, 3_600_000) is None
    assert running_sums("count_over_time", fractions, ends, 3_600_000) is not None
    nan_sample = _samples(2, True, integers=True)
    nan_sample.values[0, -3] = NAN_VALUE
    assert running_sums("avg_over_time", nan_sample, ends, 3_600_000) is None


@pytest.mark.parametrize("name", sorted(RANGE_FUNCTIONS))
def test_stacked_windows_answer_what_each_window_does(name: str) -> None:
    """Many windows in one call (their edge rows masked by their own times) against each
    window reduced where it lies."""
    samples = _samples(len(name), True, integers=False)
    ends = samples.times[-1] - np.arange(0, 600_000, 10_000)[::-1] - 2_345
    params = np.full((1, len(ends)), 0.3) if name in ("quantile_over_time", "predict_linear") else None
    if name == "holt_winters":
        params = np.full((2, len(ends)), 0.5)
    args = np.zeros((0, len(ends))) if params is None else params
    expected = np.concatenate(
        [
            evaluate_range(name, samples, ends[i : i + 1], 900_000, args[:, i : i + 1], lambda: None)
            for i in range(len(ends))
        ],
        axis=1,
    )
    found = evaluate_range(name, samples, ends, 900_000, args, lambda: None)
    np.testing.assert_allclose(found, expected, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize(
    "name", ["min_over_time", "max_over_time", "count_over_time", "changes", "resets", "last_over_time"]
)
def test_nan_samples_in_long_windows(name: str) -> None:
    """A NaN sample is passed over by min and max unless the window holds nothing else (the
    answer is then a NaN sample), and counted."""
    samples = _samples(9, True, integers=True)
    samples.values[2, :] = np.nan
    samples.values[2, 380:390] = NAN_VALUE  # the last windows of series 2: NaN samples only
    samples.values[3, 200:] = NAN_VALUE
    samples.values[4, 300:390:3] = 7.0  # a flat stretch: no change
    ends = samples.times[-1] - np.arange(0, 120_000, 5_000)[::-1]
    args = np.zeros((0, len(ends)))
    expected = np.concatenate(
        [
            evaluate_range(name, samples, ends[i : i + 1], 60_000, args[:, :1], lambda: None)
            for i in range(len(ends))
        ],
        axis=1,
    )
    found = evaluate_range(name, samples, ends, 60_000, args, lambda: None)
    assert np.array_equal(found.view(np.uint64), expected.view(np.uint64))
