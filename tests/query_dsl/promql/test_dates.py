"""PromQL's date functions by arrays (query_dsl/promql/dates.py) answer what a ``datetime``
per value answers (``PARTS``), fractions of a second rounded as ``fromtimestamp`` rounds them."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from query_dsl.promql.dates import PARTS, part_values

EDGES = [
    0.0,
    -0.0,
    -1.0,
    -0.5,
    -0.0000004,
    -0.0000005,
    -0.0000006,
    59.9999995,
    59.9999994,
    86_399.9999996,
    951_782_400.0,  # 2000-02-29
    951_868_799.5,
    1_709_164_800.0,  # 2024-02-29
    -2_203_891_200.0,  # 1900-03-01
    -62_135_596_800.0,  # 0001-01-01
    253_402_300_799.0,
    2.5e11 - 1,
]


def _expected(name: str, values: np.ndarray) -> list[float]:
    return [PARTS[name](datetime.fromtimestamp(v, UTC)) for v in values.tolist()]


@pytest.mark.parametrize("name", sorted(PARTS))
def test_the_edges_and_a_spread_of_times_answer_as_datetime(name: str) -> None:
    rng = np.random.default_rng(27)
    spread = np.concatenate(
        [
            rng.uniform(-62_135_596_800, 2.5e11, 3000),
            np.round(rng.uniform(-3e9, 3e9, 3000)),
            np.round(rng.uniform(-3e9, 3e9, 1000))
            + rng.choice([0.4999995, 0.9999995, 0.9999996, -0.0000005], 1000),
            EDGES,
        ]
    )
    assert part_values(name, spread).tolist() == _expected(name, spread)
    assert part_values(name, spread[:0]).tolist() == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-62_135_596_800, 2.5e11), min_size=1, max_size=20), st.sampled_from(sorted(PARTS)))
def test_any_time_answers_as_datetime(values: list[float], name: str) -> None:
    array = np.array(values)
    assert part_values(name, array).tolist() == _expected(name, array)


def test_a_time_before_the_year_1_fails_as_datetime_fails() -> None:
    with pytest.raises((ValueError, OverflowError)):
        datetime.fromtimestamp(-1e11, UTC)
    with pytest.raises((ValueError, OverflowError)):
        part_values("hour", np.array([0.0, -1e11]))
