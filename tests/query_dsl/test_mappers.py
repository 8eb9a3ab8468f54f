"""Every mapper against an independent computation (plain loops or pandas), with NaN gaps
and counter resets."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from query_dsl import Matrix, QueryTypeError, apply_mapper

STEP = 60_000
RNG = np.random.default_rng(7)


def matrix(values: np.ndarray) -> Matrix:
    rows, cols = values.shape
    return Matrix(
        [f"m{i}" for i in range(rows)],
        [{"i": str(i)} for i in range(rows)],
        np.arange(cols) * STEP,
        values,
        STEP,
    )


def gappy(rows: int = 6, cols: int = 40, counters: bool = False) -> np.ndarray:
    if counters:
        values = np.cumsum(RNG.integers(0, 10, size=(rows, cols)), axis=1).astype(float)
        values[1, 15:] -= values[1, 15]  # a reset: the process restarted
        values[2, 30:] = values[2, 30:] - values[2, 29] + 1  # another, not to zero
    else:
        values = RNG.normal(50, 20, size=(rows, cols))
    values[RNG.random((rows, cols)) < 0.2] = np.nan
    values[3, :] = np.nan  # a series with nothing
    values[4, 10:20] = np.nan  # a long gap
    return values


def window_values(row: np.ndarray, t: int, w: int) -> list[float]:
    return [v for v in row[max(0, t - w + 1) : t + 1] if not math.isnan(v)]


def reference(values: np.ndarray, w: int, fn) -> np.ndarray:
    out = np.full_like(values, np.nan)
    for r in range(values.shape[0]):
        for t in range(values.shape[1]):
            got = window_values(values[r], t, w)
            if got:
                out[r, t] = fn(got, values[r], t, w)
    return out


def increase_of(row: np.ndarray, t: int, w: int) -> float:
    present = [(i, row[i]) for i in range(max(0, t - w + 1), t + 1) if not math.isnan(row[i])]
    total = 0.0
    for (_, previous), (_, current) in itertools.pairwise(present):
        total += current if current < previous else current - previous
    return total


@pytest.mark.parametrize("w", [1, 3, 10])
def test_delta(w: int) -> None:
    values = gappy()
    expected = reference(values, w, lambda got, row, t, w: got[-1] - got[0])
    np.testing.assert_allclose(
        apply_mapper(matrix(values), "delta", w * STEP).values, expected, equal_nan=True
    )


@pytest.mark.parametrize("w", [2, 5, 15])
def test_increase_and_rate_handle_counter_resets(w: int) -> None:
    values = gappy(counters=True)
    expected = reference(values, w, lambda got, row, t, w: increase_of(row, t, w))
    np.testing.assert_allclose(
        apply_mapper(matrix(values), "increase", w * STEP).values, expected, equal_nan=True
    )

    def rate(got: list[float], row: np.ndarray, t: int, w: int) -> float:
        indexes = [i for i in range(max(0, t - w + 1), t + 1) if not math.isnan(row[i])]
        seconds = (indexes[-1] - indexes[0]) * STEP / 1000
        return increase_of(row, t, w) / seconds if seconds else math.nan

    np.testing.assert_allclose(
        apply_mapper(matrix(values), "rate", w * STEP).values, reference(values, w, rate), equal_nan=True
    )
    assert (
        np.nanmin(apply_mapper(matrix(values), "increase", w * STEP).values) >= 0
    )  # resets never go negative


@pytest.mark.parametrize("w", [1, 4, 40])
@pytest.mark.parametrize("name", ["delta", "increase", "rate"])
def test_window_mappers_without_gaps_take_the_short_way_to_the_same_values(name: str, w: int) -> None:
    """With no NaN in the matrix, window mappers read each window's own ends; one series of
    NaN sends the same series down the gap-aware way, which must give the same values."""
    counters = np.cumsum(RNG.integers(0, 10, size=(5, 30)), axis=1).astype(float)
    counters[1, 12:] -= counters[1, 12]  # a reset
    counters[2, 20:] = np.inf  # no NaN, and no finite step
    with_empty = np.vstack([counters, np.full(30, np.nan)])
    with np.errstate(all="ignore"):
        short = apply_mapper(matrix(counters), name, w * STEP).values
        gap_aware = apply_mapper(matrix(with_empty), name, w * STEP).values[:-1]
    np.testing.assert_array_equal(short, gap_aware)
    if name == "delta":
        np.testing.assert_array_equal(
            short[[0, 1]], reference(counters[[0, 1]], w, lambda got, row, t, w: got[-1] - got[0])
        )


@pytest.mark.parametrize(
    ("name", "pandas_name"),
    [
        ("mean", "mean"),
        ("min", "min"),
        ("max", "max"),
        ("median", "median"),
        ("sum", "sum"),
        ("count", "count"),
    ],
)
def test_moving_statistics_match_pandas_rolling(name: str, pandas_name: str) -> None:
    values = gappy()
    frame = pd.DataFrame(values.T)
    expected = getattr(frame.rolling(5, min_periods=1), pandas_name)().to_numpy().T
    if name == "count":
        expected = np.where(expected == 0, 0.0, expected)
    if name == "sum":
        expected = np.where(frame.rolling(5, min_periods=1).count().to_numpy().T == 0, np.nan, expected)
    got = apply_mapper(matrix(values), name, 5 * STEP).values
    np.testing.assert_allclose(got, expected, equal_nan=True, rtol=1e-9)


def test_moving_percentile_matches_pandas_quantile() -> None:
    values = gappy()
    expected = pd.DataFrame(values.T).rolling(7, min_periods=1).quantile(0.9).to_numpy().T
    got = apply_mapper(matrix(values), "percentile", 7 * STEP, (90.0,)).values
    np.testing.assert_allclose(got, expected, equal_nan=True, rtol=1e-9)


def test_element_wise_and_fills_match_numpy_and_pandas() -> None:
    values = gappy() - 50
    m = matrix(values)
    np.testing.assert_allclose(apply_mapper(m, "abs").values, np.abs(values), equal_nan=True)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(
            apply_mapper(m, "log").values, np.where(values > 0, np.log(values), np.nan), equal_nan=True
        )
        np.testing.assert_allclose(
            apply_mapper(m, "log10").values, np.where(values > 0, np.log10(values), np.nan), equal_nan=True
        )
    np.testing.assert_allclose(
        apply_mapper(m, "clamp", None, (-10.0, 10.0)).values, np.clip(values, -10, 10), equal_nan=True
    )
    frame = pd.DataFrame(values.T)
    np.testing.assert_allclose(
        apply_mapper(m, "fill_previous").values, frame.ffill().to_numpy().T, equal_nan=True
    )
    np.testing.assert_allclose(apply_mapper(m, "fill_zero").values, frame.fillna(0).to_numpy().T)
    np.testing.assert_allclose(
        apply_mapper(m, "timeshift", None, (3.0 * STEP,)).values, frame.shift(3).to_numpy().T, equal_nan=True
    )
    np.testing.assert_allclose(
        apply_mapper(m, "timeshift", None, (-2.0 * STEP,)).values,
        frame.shift(-2).to_numpy().T,
        equal_nan=True,
    )


@pytest.mark.parametrize(
    ("name", "window", "params", "message"),
    [
        ("delta", None, (), "needs a window"),
        ("delta", 90_000, (), "not a positive multiple"),
        ("abs", STEP, (), "takes no window"),
        ("clamp", None, (1.0,), "takes 2 parameter"),
        ("percentile", STEP, (101.0,), "within 0..100"),
        ("nope", None, (), "unknown mapper"),
        ("timeshift", None, (30_000.0,), "not a multiple of the step"),
    ],
)
def test_misuse_is_a_clear_error(
    name: str, window: int | None, params: tuple[float, ...], message: str
) -> None:
    with pytest.raises(QueryTypeError, match=message):
        apply_mapper(matrix(gappy()), name, window, params)
