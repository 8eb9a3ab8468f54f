"""A call written twice in one query is evaluated once, and the answer is the same as when
each place evaluates its own."""

from __future__ import annotations

import numpy as np
import pytest

from query_dsl import Evaluator, Matrix, apply_op
from query_dsl.testing import demo_store
from vhms import FetchResult, LocalClient
from vhms.server import Store

END = 1_700_000_000_000 // 60_000 * 60_000


class CountingSource(LocalClient):
    """A store read in process, counting the fetches that reach it."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.fetches: list[str] = []

    def fetch(self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto") -> FetchResult:
        self.fetches.append(selector)
        return super().fetch(selector, start_ms, end_ms, resolution)


@pytest.fixture(scope="module")
def store() -> Store:
    return demo_store(END)


def evaluate(store: Store, query: str) -> tuple[Matrix | float, list[str]]:
    source = CountingSource(store)
    return Evaluator(source, now_ms=END).evaluate(query), source.fetches


def test_a_share_reads_its_series_once_and_matches_each_side_evaluated_alone(store: Store) -> None:
    rates = 'fetch("http.requests", last=30m) | map(rate, 5m)'
    by_status = f"reduce({rates}, sum, by=[status])"
    shared, fetches = evaluate(
        store, f"({rates} | reduce(sum, by=[method, status])) / on(status) group_left {by_status}"
    )
    assert fetches == ["http.requests"]
    left, _ = evaluate(store, f"{rates} | reduce(sum, by=[method, status])")
    right, _ = evaluate(store, by_status)
    assert isinstance(left, Matrix) and isinstance(right, Matrix) and isinstance(shared, Matrix)
    expected = apply_op("/", left, right, on=["status"], group="left")
    assert isinstance(expected, Matrix)
    assert shared.labels == expected.labels
    np.testing.assert_array_equal(shared.values, expected.values)
    assert np.nanmax(shared.values) < 1  # a share


def test_calls_written_alike_anywhere_are_one_and_different_ones_are_not(store: Store) -> None:
    # the same call in other spellings: quotes, a duration in other units, spaces
    same, fetches = evaluate(
        store, "fetch(\"disk.used.bytes\", last=1h) / fetch('disk.used.bytes', last = 60m)"
    )
    assert fetches == ["disk.used.bytes"]
    assert isinstance(same, Matrix) and np.all(same.values[~np.isnan(same.values)] == 1)
    _, fetches = evaluate(store, 'fetch("disk.used.bytes", last=1h) / fetch("disk.size.bytes", last=1h)')
    assert fetches == ["disk.used.bytes", "disk.size.bytes"]
    used = 'fetch("disk.used.bytes", last=1h)'
    mean_minus_sum, fetches = evaluate(store, f"({used} | map(mean, 15m)) - ({used} | map(sum, 15m))")
    assert fetches == ["disk.used.bytes"]  # the fetch is shared, the two mappers are not
    assert isinstance(mean_minus_sum, Matrix)
    assert (mean_minus_sum.values[:, 1:] < 0).all()  # from the second instant on, a mean is below a sum


def test_a_repeat_inside_a_repeat_and_three_uses(store: Store) -> None:
    inner = 'fetch("rack.temperature.celsius", last=1h)'
    query = f"{inner} + {inner} + ({inner} | map(mean, 5m)) - ({inner} | map(mean, 5m))"
    result, fetches = evaluate(store, query)
    assert fetches == ["rack.temperature.celsius"]
    temperature, _ = evaluate(store, inner)
    assert isinstance(result, Matrix) and isinstance(temperature, Matrix)
    np.testing.assert_allclose(result.values, 2 * temperature.values)
