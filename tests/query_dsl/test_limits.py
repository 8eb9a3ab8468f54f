"""The query's limits hold inside a step, not only between steps: a filter's regex over many
label values, a reduce class by class, a bucketize bucket by bucket and a moving statistic
over a long window each stop at ``Limits.timeout_s``; slicing changes no result; nesting,
durations, times and counts are bounded with clear errors, never a RecursionError or an
OverflowError."""

from __future__ import annotations

import time

import numpy as np
import pytest

from query_dsl import (
    Evaluator,
    Limits,
    Matrix,
    QueryLimitError,
    QuerySyntaxError,
    QueryTypeError,
    apply_mapper,
)
from query_dsl.parser import MAX_DEPTH
from vhms import FetchResult, parse_selector

STEP = 60_000
END = 1_700_000_000_000 // STEP * STEP
TIMEOUT_S = 0.3
# the step is cut short: well under what the step takes whole (seconds), generous for a
# loaded 2-core machine
BOUND_S = TIMEOUT_S + 1.5


class ArraySource:
    """A data source over series held in arrays (what a store answers, without its rings:
    long time axes cost a store a whole chunk of 65,536 series per slot)."""

    def __init__(self, keys: list[str], values: np.ndarray) -> None:
        self.result = FetchResult.from_keys(keys, END - np.arange(values.shape[1])[::-1] * STEP, values, STEP)
        self.names = [name for name, _ in self.result.series()]

    def fetch(self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto") -> FetchResult:
        name = parse_selector(selector).name
        assert name is not None and name.op == "=", "this source reads one name"
        return self.result if name.value in self.names else FetchResult.empty(STEP)

    def series(self, selector: str) -> list[str]:
        return self.result.keys

    def label_names(self) -> list[str]:
        return sorted(label for label in self.result.labels if label != "__name__")

    def label_values(self, label: str) -> list[str]:
        return sorted(self.result.labels[label][0])


def evaluate(source: ArraySource, query: str) -> tuple[object, float]:
    evaluator = Evaluator(source, now_ms=END + STEP, limits=Limits(timeout_s=TIMEOUT_S))
    started = time.perf_counter()
    try:
        return evaluator.evaluate(query), time.perf_counter() - started
    except QueryLimitError as exc:
        return exc, time.perf_counter() - started


def stops_in_time(source: ArraySource, query: str) -> None:
    outcome, took = evaluate(source, query)
    assert isinstance(outcome, QueryLimitError), f"{query} ran whole ({took:.1f} s): {outcome!r}"
    assert f"longer than {TIMEOUT_S:g} s" in str(outcome) and took < BOUND_S, took


def test_a_filter_regex_over_many_values_stops_at_the_deadline() -> None:
    """20,000 values of 1,000 characters and a regex whose DFA explodes: seconds in RE2."""
    letters = np.where(np.random.default_rng(3).random((20_000, 1000)) < 0.5, b"a", b"b")
    keys = [f"m{{v={row.tobytes().decode()}{i}}}" for i, row in enumerate(letters)]
    source = ArraySource(keys, np.ones((len(keys), 2)))
    stops_in_time(source, 'fetch("m", last=2m) | filter("{v~\\"[ab]*a[ab]{20}[0-9]+\\"}")')


def test_a_reduce_class_by_class_stops_at_the_deadline() -> None:
    keys = [f"m{{i={i}}}" for i in range(100_000)]
    source = ArraySource(keys, np.ones((len(keys), 10)))
    stops_in_time(source, 'fetch("m", last=10m) | reduce(median, by=[i])')


def test_a_bucketize_bucket_by_bucket_stops_at_the_deadline() -> None:
    source = ArraySource([f"m{{i={i}}}" for i in range(20)], np.ones((20, 200_000)))
    stops_in_time(source, 'fetch("m", last=200000m) | bucketize(2m, median)')


def test_a_moving_statistic_over_a_long_window_stops_at_the_deadline() -> None:
    """60 series x 800 instants x 800-instant windows: 38M cells that median copies."""
    source = ArraySource([f"m{{i={i}}}" for i in range(60)], np.random.default_rng(1).normal(size=(60, 800)))
    stops_in_time(source, 'fetch("m", last=800m) | map(median, 800m)')


@pytest.mark.parametrize("mapper", ["median", "max", "percentile", "rate", "mean"])
def test_slices_and_cut_windows_change_no_result(mapper: str) -> None:
    """A matrix big enough to go through in slices gives what each series alone gives,
    and a window longer than the axis what the whole axis gives."""
    rng = np.random.default_rng(5)
    values = rng.normal(50, 10, size=(300, 120)).cumsum(axis=1)
    values[rng.random(values.shape) < 0.1] = np.nan
    m = Matrix(
        [f"m{i}" for i in range(300)],
        [{"i": str(i)} for i in range(300)],
        np.arange(120) * STEP,
        values,
        STEP,
    )
    params = (90.0,) if mapper == "percentile" else ()
    sliced = apply_mapper(m, mapper, 120 * STEP, params).values  # 300 x 120 x 120 cells: sliced
    alone = np.vstack(
        [apply_mapper(m.select([row]), mapper, 120 * STEP, params).values for row in range(0, 300, 37)]
    )
    np.testing.assert_array_equal(sliced[::37], alone)
    np.testing.assert_array_equal(apply_mapper(m, mapper, 10_000 * STEP, params).values, sliced)


@pytest.mark.parametrize(
    "query",
    [
        "+".join(["1"] * 3000),  # a chain 3,000 deep: a RecursionError in the evaluator before
        "^".join(["2"] * 3000),  # right-associative: deep in the parser
        "-" * 5000 + "1",
        'fetch("m", last=1m)' + "|top(1)" * 1200,
        "top(" * 1000 + 'fetch("m", last=1m)' + ", 1)" * 1000,
        'fetch("m", last=' + "[" * 3000 + "]" * 3000 + ")",
    ],
)
def test_deep_nesting_is_a_syntax_error(query: str) -> None:
    with pytest.raises(QuerySyntaxError, match=f"at most {MAX_DEPTH} levels"):
        Evaluator(ArraySource(["m{i=0}"], np.ones((1, 1)))).evaluate(query)


def test_nesting_up_to_the_limit_evaluates() -> None:
    assert (
        Evaluator(ArraySource(["m{i=0}"], np.ones((1, 1)))).evaluate("+".join(["1"] * MAX_DEPTH)) == MAX_DEPTH
    )
    balanced = "+".join(f"({'+'.join(['1'] * 30)})" for _ in range(30))  # 900 terms, 60 deep
    assert Evaluator(ArraySource(["m{i=0}"], np.ones((1, 1)))).evaluate(balanced) == 900


@pytest.mark.parametrize(
    ("query", "error", "message"),
    [
        ('fetch("m", last=100000000000w)', QuerySyntaxError, "longer than 100 years"),
        ('fetch("m", last=3000w)', QueryTypeError, "not a time within 0"),  # before 1970
        ('fetch("m", start=1e999)', QueryTypeError, "inf is not a time"),
        ('fetch("m", start=1e999 - 1e999)', QueryTypeError, "nan is not a time"),
        ('fetch("m", start=-1)', QueryTypeError, "-1 is not a time"),
        ('fetch("m", end=1e300)', QueryTypeError, "is not a time within"),
        ('fetch("m", start="0001-01-01")', QueryTypeError, "is not epoch ms"),
        ('fetch("m", last=1m) | map(timeshift, 1e999)', QueryTypeError, "timeshift of inf"),
        ('fetch("m", last=1m) | top(1e999)', QueryTypeError, "whole number from 0"),
        ('fetch("m", last=1m) | bottom(-1)', QueryTypeError, "whole number from 0"),
    ],
)
def test_absurd_durations_times_and_counts_are_clear_errors(query: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        Evaluator(ArraySource(["m{i=0}"], np.ones((1, 1))), now_ms=END + STEP).evaluate(query)
