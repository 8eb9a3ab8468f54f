"""``*_over_time`` of series with a sample in every bucket whose samples of a bucket share a
time (``ranges._dense_over_time``: each window's rows, whole-row folds) answer what each
series' windows stacked and reduced one by one do, with infinities (a NaN sample's answer),
own sample times or bucket times, windows shorter and longer than the data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from query_dsl.promql import ranges as ranges_module
from query_dsl.promql.dense_over_time import DENSE_OVER_TIME
from query_dsl.promql.selection import Samples
from query_dsl.promql.values import is_nan_value
from query_dsl.series_table import SeriesTable

STEP = 15_000


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 30),
    st.integers(0, 2**32 - 1),
    st.sampled_from(sorted(DENSE_OVER_TIME)),
    st.sampled_from([15_000, 45_000, 60_000, 150_000]),
    st.booleans(),
    st.sampled_from([STEP // 3, STEP, 2 * STEP]),
)
def test_dense_windows_answer_what_the_stacked_windows_do(
    series: int, buckets: int, seed: int, function: str, range_ms: int, exact: bool, step: int
) -> None:
    rng = np.random.default_rng(seed)
    times = np.arange(buckets, dtype=np.int64) * STEP + 1_000_000
    values = np.round(rng.normal(size=(series, buckets)) * 100, 1)
    values[rng.random((series, buckets)) < 0.03] = np.inf
    values[rng.random((series, buckets)) < 0.03] = -np.inf
    own = np.repeat(times[None, :] + rng.integers(0, STEP, (1, buckets)), series, axis=0) if exact else None
    table = SeriesTable.from_lists(["x"] * series, [{"r": str(r)} for r in range(series)])
    samples = Samples(table, times, values, STEP, own)
    ends = np.arange(times[0] - STEP, times[-1] + 3 * STEP, step, dtype=np.int64)
    params = np.zeros((0, len(ends)))
    dense = ranges_module._dense_over_time(function, samples, ends, range_ms, lambda: None)
    assert dense is not None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ranges_module, "DENSE_OVER_TIME", frozenset())
        stacked = ranges_module.evaluate_range(function, samples, ends, range_ms, params, lambda: None)
    np.testing.assert_allclose(dense, stacked, rtol=1e-12, equal_nan=True)
    np.testing.assert_array_equal(is_nan_value(dense), is_nan_value(stacked))


def test_series_with_a_gap_or_times_of_their_own_take_the_stacked_windows() -> None:
    times = np.arange(4, dtype=np.int64) * STEP
    table = SeriesTable.from_lists(["x", "x"], [{"r": "a"}, {"r": "b"}])
    ends = times + STEP
    gap = Samples(table, times, np.array([[1.0, 2, 3, 4], [1, np.nan, 3, 4]]), STEP)
    assert ranges_module._dense_over_time("sum_over_time", gap, ends, 60_000, lambda: None) is None
    own = times[None, :] + np.array([[0], [1]])
    apart = Samples(table, times, np.ones((2, 4)), STEP, own)
    assert ranges_module._dense_over_time("sum_over_time", apart, ends, 60_000, lambda: None) is None
