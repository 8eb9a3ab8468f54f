"""The fast range path (window mappers as differences of prefix sums on the time-major
layout, ``reduce`` summing again only the instants with gaps) against a straightforward
one: a Python loop over every series, instant and window cell, on random matrices with NaN
gaps, counter resets and fractional values, in both layouts a matrix can have (a fetch's
transposed view and a computed row-major array) and cut into blocks of series."""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from query_dsl import Matrix, apply_mapper, reduce_matrix
from query_dsl import mappers as mappers_module
from query_dsl import reduce as reduce_module
from query_dsl.evaluator import Evaluator
from vhms import LocalClient
from vhms.server import Store

STEP = 60_000
WINDOW_MAPPERS = ["delta", "increase", "rate", "mean", "sum", "count"]


@st.composite
def gappy_counters(draw: st.DrawFn) -> np.ndarray:
    """``[series, instants]`` counters: increments (some fractional), restarts from a small
    value (a decrease is a reset), NaN gaps, sometimes a series with no value at all."""
    series = draw(st.integers(1, 6))
    instants = draw(st.integers(1, 24))
    cells = series * instants
    increments = draw(st.lists(st.sampled_from([0.0, 1.0, 2.5, 7.0, 0.1]), min_size=cells, max_size=cells))
    # whole matrices without gaps or without resets too: those series take the short way
    restarts = draw(
        st.lists(st.booleans() if draw(st.booleans()) else st.just(False), min_size=cells, max_size=cells)
    )
    gap = st.sampled_from([False, False, True]) if draw(st.booleans()) else st.just(False)
    gaps = draw(st.lists(gap, min_size=cells, max_size=cells))
    values = np.empty((series, instants))
    for r in range(series):
        level = 0.0
        for t in range(instants):
            i = r * instants + t
            level = increments[i] if restarts[i] and t else level + increments[i]
            values[r, t] = level
    values[np.array(gaps).reshape(series, instants)] = np.nan
    if draw(st.booleans()):
        values[draw(st.integers(0, series - 1))] = np.nan
    return values


def present(row: np.ndarray, t: int, window: int) -> list[tuple[int, float]]:
    return [(i, float(row[i])) for i in range(max(0, t - window + 1), t + 1) if not math.isnan(row[i])]


def straightforward(name: str, row: np.ndarray, t: int, window: int) -> float:
    cells = present(row, t, window)
    if name == "count":
        return float(len(cells))
    if not cells:
        return math.nan
    values = [v for _, v in cells]
    if name == "sum":
        return math.fsum(values)
    if name == "mean":
        return math.fsum(values) / len(values)
    if name == "delta":
        return values[-1] - values[0]
    gained = math.fsum(cur if cur < prev else cur - prev for prev, cur in itertools.pairwise(values))
    if name == "increase":
        return gained
    seconds = (cells[-1][0] - cells[0][0]) * STEP / 1000
    return gained / seconds if seconds else math.nan


def matrix(values: np.ndarray) -> Matrix:
    series, instants = values.shape
    return Matrix(
        [f"m{r}" for r in range(series)],
        [{"r": str(r), "c": str(r % 2)} for r in range(series)],
        np.arange(instants) * STEP,
        values,
        STEP,
    )


@settings(max_examples=150, deadline=None)
@given(
    gappy_counters(),
    st.sampled_from(WINDOW_MAPPERS),
    st.integers(1, 30),
    st.booleans(),
    st.integers(1, 40),
)
def test_window_mappers_match_a_loop_over_every_window(
    values: np.ndarray, name: str, window: int, fetched_layout: bool, block_cells: int
) -> None:
    layout = np.asfortranarray(values) if fetched_layout else np.ascontiguousarray(values)
    with pytest.MonkeyPatch.context() as patch:  # blocks of a few series, as 100,000 series go
        patch.setattr(mappers_module, "_SLICE_CELLS", block_cells)
        got = apply_mapper(matrix(layout), name, window * STEP).values
    expected = np.array(
        [[straightforward(name, row, t, window) for t in range(values.shape[1])] for row in values]
    ).reshape(values.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9, equal_nan=True)


@settings(max_examples=100, deadline=None)
@given(gappy_counters(), st.sampled_from(["sum", "mean", "count"]), st.sampled_from(["increase", "rate"]))
def test_a_range_query_matches_a_loop(values: np.ndarray, aggregate: str, mapper: str) -> None:
    """``map(mapper, 3m) | reduce(aggregate, by=[c])`` as a range query runs it: a window
    not yet full in the first instants, gaps in the others."""
    mapped = apply_mapper(matrix(np.asfortranarray(values)), mapper, 3 * STEP)
    got = reduce_matrix(mapped, aggregate, by=["c"])
    per_series = np.array(
        [[straightforward(mapper, row, t, 3) for t in range(values.shape[1])] for row in values]
    ).reshape(values.shape)
    for row, labels in zip(got.values, got.labels, strict=True):
        members = per_series[[r for r in range(len(values)) if str(r % 2) == labels["c"]]]
        for t in range(values.shape[1]):
            cells = [v for v in members[:, t].tolist() if not math.isnan(v)]
            if aggregate == "count":
                expected = float(len(cells))
            elif not cells:
                expected = math.nan
            else:
                expected = math.fsum(cells) / (len(cells) if aggregate == "mean" else 1)
            np.testing.assert_allclose(row[t], expected, rtol=1e-9, atol=1e-9, equal_nan=True)


@settings(max_examples=150, deadline=None)
@given(
    gappy_counters(),
    st.sampled_from(WINDOW_MAPPERS),
    st.sampled_from(["sum", "mean", "count", "min", "max"]),
    st.integers(1, 30),
    st.sampled_from([["c"], ["r"], None]),
    st.integers(1, 40),
)
def test_a_fused_window_and_reduce_matches_the_two_steps(
    values: np.ndarray, mapper: str, aggregate: str, window: int, by: list[str] | None, block_cells: int
) -> None:
    """``reduce(map(x, f, w), a)`` evaluated fused, by blocks of a few series (a class's
    members spanning blocks), answers what the map and then the reduce answer, over what a
    store fetches."""
    series, instants = values.shape
    base = (int(time.time() * 1000) // STEP - instants - 2) * STEP
    store = Store("1m:120")
    keys = [f"m{{c={r % 2},r={r}}}" for r in range(series)]
    for t in range(instants):
        store.ingest(keys, values[:, t], np.full(series, base + t * STEP))
    evaluator = Evaluator(LocalClient(store), start_ms=base, end_ms=base + instants * STEP)
    grouping = f", by=[{by[0]}]" if by else ""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reduce_module, "_BLOCK_CELLS", block_cells)
        fused = evaluator.evaluate(f'fetch("m") | map({mapper}, {window}m) | reduce({aggregate}{grouping})')
    fetched = evaluator.evaluate('fetch("m")')
    assert isinstance(fetched, Matrix) and isinstance(fused, Matrix)
    mapped = apply_mapper(fetched, mapper, min(window, instants) * STEP)
    expected = reduce_matrix(mapped, aggregate, by=by)
    assert fused.labels == expected.labels
    np.testing.assert_allclose(fused.values, expected.values, rtol=1e-12, atol=1e-12, equal_nan=True)
