"""``sum by (...) (rate(x[w]))`` and its kin, and ``avg by (...) (x)`` over an instant
selector, are computed a block of series at a time, each block fetched and reduced before the
next (``query_dsl.promql.blockwise``): the same answer as the whole matrix aggregated
afterwards, on random counters with gaps, resets and scrape offsets, and random gauges with
gaps, NaN samples and stale markers, in blocks of a few series (a class's members spanning
blocks)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from query_dsl.exceptions import MatchingError
from query_dsl.matrix import Matrix
from query_dsl.promql import blockwise, range_query
from query_dsl.promql import engine as engine_module
from query_dsl.promql import ranges as ranges_module
from query_dsl.promql.selection import Samples
from query_dsl.series_table import SeriesTable
from vhms import LocalClient
from vhms.server import Store

STEP = 15_000


@st.composite
def stores(draw: st.DrawFn) -> tuple[Store, int, int]:
    """A store of counters (labels c and r), their samples at a per-series offset within
    each 15 s bucket, some missing, some restarting from a small value; and the span."""
    series = draw(st.integers(1, 12))
    buckets = draw(st.integers(2, 40))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    base = (int(time.time() * 1000) // STEP - buckets - 4) * STEP
    store = Store("15s:100,1m:60")
    keys = [f"req_total{{c=c{r % 3},r=r{r}}}" for r in range(series)]
    offsets = rng.integers(0, STEP, series)
    level = rng.random(series) * 100
    gap = draw(st.sampled_from([0.0, 0.1, 0.3]))
    for bucket in range(buckets):
        level += rng.choice([0.0, 1.0, 2.5, 7.0], series)
        level = np.where(rng.random(series) < 0.05, rng.random(series), level)  # resets
        present = rng.random(series) >= gap
        store.ingest(
            [key for key, kept in zip(keys, present.tolist(), strict=True) if kept],
            level[present],
            (base + bucket * STEP + offsets)[present],
        )
    return store, base, base + buckets * STEP


@settings(max_examples=80, deadline=None)
@given(
    stores(),
    st.sampled_from(["rate", "increase", "delta", "irate", "idelta"]),
    st.sampled_from(["sum", "avg", "min", "max", "count", "group"]),
    st.sampled_from(["by (c)", "without (r)", "by (r)", ""]),
    st.sampled_from(["45s", "1m", "2m30s"]),
    st.integers(1, 5),
    st.integers(1, 200),
)
def test_an_aggregate_of_a_range_function_by_blocks_answers_what_the_two_steps_do(
    data: tuple[Store, int, int], function: str, op: str, grouping: str, window: str, block: int, cells: int
) -> None:
    store, start, end = data
    source = LocalClient(store)
    inner = f"{function}(req_total[{window}])"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ranges_module, "_BLOCK", block)
        patch.setattr(blockwise, "_FETCH_BLOCK_CELLS", cells)
        fused = range_query(source, f"{op} {grouping} ({inner})", start / 1000, end / 1000, 15)
    # "* 1" leaves every value as it is and the aggregate then reads a whole matrix
    whole = range_query(source, f"{op} {grouping} ({inner} * 1)", start / 1000, end / 1000, 15)
    assert isinstance(fused.value, Matrix) and isinstance(whole.value, Matrix)
    assert fused.value.labels == whole.value.labels
    np.testing.assert_allclose(fused.value.values, whole.value.values, rtol=1e-12, atol=1e-12, equal_nan=True)


STALE, GO_NAN = np.array([0x7FF0_0000_0000_0002, 0x7FF8_0000_0000_0001], dtype=np.uint64).view(np.float64)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(2, 40),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.0, 0.2]),
    st.sampled_from([0.0, 0.05]),
    st.sampled_from(["sum", "avg", "min", "max", "count", "group"]),
    st.sampled_from(["by (c)", "without (r)", ""]),
    st.sampled_from([15, 60]),
    st.integers(1, 200),
)
def test_an_aggregate_of_an_instant_selector_by_blocks_answers_what_the_whole_matrix_does(
    series: int,
    buckets: int,
    seed: int,
    gap: float,
    odd: float,
    op: str,
    grouping: str,
    step: int,
    cells: int,
) -> None:
    """Gauges with gaps, NaN samples and stale markers (``odd`` of the samples), at offsets
    within their buckets; a block holding a NaN sample falls back to the whole matrix."""
    rng = np.random.default_rng(seed)
    base = (int(time.time() * 1000) // STEP - buckets - 4) * STEP
    store = Store("15s:100,1m:60")
    keys = [f"temp{{c=c{r % 3},r=r{r}}}" for r in range(series)]
    offsets = rng.integers(0, STEP, series)
    for bucket in range(buckets):
        values = rng.random(series) * 50
        values[rng.random(series) < odd] = GO_NAN  # a NaN sample (a NaN of numpy's is none)
        values[rng.random(series) < odd] = STALE
        present = rng.random(series) >= gap
        kept = [key for key, keep in zip(keys, present.tolist(), strict=True) if keep]
        store.ingest(kept, values[present], (base + bucket * STEP + offsets)[present])
    source = LocalClient(store)
    query = f"{op} {grouping} (temp)"
    end = base + buckets * STEP
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blockwise, "_FETCH_BLOCK_CELLS", cells)
        fused = range_query(source, query, base / 1000, end / 1000, step)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine_module, "fused_aggregate", lambda *args: None)
        whole = range_query(source, query, base / 1000, end / 1000, step)
    assert isinstance(fused.value, Matrix) and isinstance(whole.value, Matrix)
    assert fused.value.labels == whole.value.labels
    np.testing.assert_allclose(fused.value.values, whole.value.values, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_series_of_two_names_whose_labels_clash_are_refused_as_prometheus_does() -> None:
    base = (int(time.time() * 1000) // STEP - 10) * STEP
    store = Store("15s:100,1m:60")
    for bucket in range(8):
        store.ingest(
            ["a_total{c=x}", "b_total{c=x}"], np.full(2, float(bucket)), np.full(2, base + bucket * STEP)
        )
    query = 'sum(rate({__name__=~"a_total|b_total"}[1m]))'
    with pytest.raises(MatchingError, match="same labelset"):
        range_query(LocalClient(store), query, base / 1000, (base + 8 * STEP) / 1000, 15)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 8),
    st.integers(1, 30),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["rate", "increase", "delta", "irate", "idelta"]),
    st.sampled_from([15_000, 45_000, 60_000, 150_000]),
    st.booleans(),
    st.booleans(),
)
def test_the_dense_path_answers_what_the_path_for_gaps_does(
    series: int, buckets: int, seed: int, function: str, range_ms: int, exact: bool, shared: bool
) -> None:
    """Series with a sample in every bucket skip the fills and counts that gaps need
    (``_dense_rates``, gathering whole rows): the same answer as the way for gaps
    (``_gappy_rates``), own sample times or not; where every series' sample of a bucket has
    the same time (``shared``), the windows' times once per window (``_shared_rows``)."""
    rng = np.random.default_rng(seed)
    times = np.arange(buckets, dtype=np.int64) * STEP + 1_000_000
    values = np.cumsum(rng.choice([0.0, 1.0, 2.5, 7.0], (series, buckets)), axis=1)
    values = np.where(rng.random((series, buckets)) < 0.1, rng.random((series, buckets)), values)  # resets
    own = times[None, :] + rng.integers(0, STEP, (1 if shared else series, buckets)) if exact else None
    own = None if own is None else np.repeat(own, series // len(own), axis=0)
    table = SeriesTable.from_lists(["x"] * series, [{"r": str(r)} for r in range(series)])
    samples = Samples(table, times, values, STEP, own)
    ends = np.arange(times[0] - STEP, times[-1] + 3 * STEP, STEP // 3, dtype=np.int64)
    exact = own is not None
    window = ranges_module._window_rows(times, ends, range_ms, exact, STEP)
    time_major = np.ascontiguousarray(values.T), np.ascontiguousarray(samples.sample_times().T)
    own_rows = ranges_module._shared_rows(time_major[1])
    assert (own_rows.shape[1] == 1) == (shared or not exact or series == 1)
    dense = ranges_module._dense_rates(function, time_major[0], own_rows, window, ends, range_ms, exact)
    gaps = ranges_module._gappy_rates(function, *time_major, window, ends, range_ms, exact)
    np.testing.assert_array_equal(dense, gaps)
