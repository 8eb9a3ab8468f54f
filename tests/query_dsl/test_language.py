"""The text form end to end over a real store, its errors, and property-based fuzzing."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from query_dsl import (
    Evaluator,
    Limits,
    MatchingError,
    Matrix,
    QueryError,
    QueryLimitError,
    QuerySyntaxError,
    QueryTypeError,
    apply_mapper,
    apply_op,
    bucketize,
    parse,
    reduce_matrix,
)
from vhms import LocalClient
from vhms.server import Store

MINUTE = 60_000
NOW = int(time.time() * 1000) // MINUTE * MINUTE


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    store = Store()
    keys = [
        f"http.requests{{dc=jb,host=h{h},method={x},rack=r{h % 2}}}" for h in range(4) for x in ("GET", "PUT")
    ]
    for minute in range(30):
        store.ingest(
            keys, np.arange(len(keys)) + minute * 10.0, np.full(len(keys), NOW - (29 - minute) * MINUTE)
        )
    size = [f"disk.size{{host=h{h},volume=/data}}" for h in range(4)]
    used = [f"disk.used{{host=h{h},volume=/data}}" for h in range(4)]
    store.ingest(size, np.full(4, 100.0), np.full(4, NOW))
    store.ingest(used, np.array([10.0, 20.0, 30.0, 40.0]), np.full(4, NOW))
    return Evaluator(
        LocalClient(store), now_ms=NOW + MINUTE, limits=Limits(max_series=1000, max_points=10_000)
    )


def test_artimons_one_liners(evaluator: Evaluator) -> None:
    recent = evaluator.evaluate('fetch("http.requests{dc=jb}", last=10m)')
    assert isinstance(recent, Matrix) and len(recent) == 8 and len(recent.timestamps) == 10
    per_rack = evaluator.evaluate(
        'fetch("http.requests", last=10m) | map(rate, 5m) | reduce(mean, by=[rack])'
    )
    assert isinstance(per_rack, Matrix) and sorted(lab["rack"] for lab in per_rack.labels) == ["r0", "r1"]
    np.testing.assert_allclose(per_rack.values[:, -1], 10 / 60)
    free = evaluator.evaluate('fetch("disk.size", last=1m) - fetch("disk.used", last=1m)')
    assert isinstance(free, Matrix) and sorted(free.values[:, 0].tolist()) == [60.0, 70.0, 80.0, 90.0]
    pct = evaluator.evaluate('fetch("disk.used", last=1m) / on(host) fetch("disk.size", last=1m) * 100')
    assert isinstance(pct, Matrix) and sorted(pct.values[:, 0].tolist()) == [10.0, 20.0, 30.0, 40.0]


def test_text_and_python_forms_agree(evaluator: Evaluator) -> None:
    text = evaluator.evaluate(
        'fetch("http.requests", last=20m) | map(increase, 10m) | bucketize(5m, max)'
        " | reduce(sum, by=[method])"
    )
    base = evaluator.evaluate('fetch("http.requests", last=20m)')
    assert isinstance(base, Matrix) and isinstance(text, Matrix)
    python = reduce_matrix(
        bucketize(apply_mapper(base, "increase", 10 * MINUTE), 5 * MINUTE, "max"), "sum", by=["method"]
    )
    assert text.labels == python.labels
    np.testing.assert_allclose(text.values, python.values, equal_nan=True)


def test_matching_modifiers_in_text(evaluator: Evaluator) -> None:
    with pytest.raises(MatchingError, match="asked for"):
        evaluator.evaluate('fetch("http.requests", last=1m) / on(host) fetch("disk.size", last=1m)')
    share = evaluator.evaluate(
        'fetch("http.requests", last=1m) / on(host) group_left fetch("disk.size", last=1m)'
    )
    assert isinstance(share, Matrix) and len(share) == 8 and "method" in share.labels[0]
    flags = evaluator.evaluate('fetch("disk.used", last=1m) > bool 25')
    assert isinstance(flags, Matrix) and sorted(flags.values[:, 0].tolist()) == [0.0, 0.0, 1.0, 1.0]
    assert evaluator.evaluate("(1 + 2) * -3 ^ 2") == -27.0


@pytest.mark.parametrize(
    ("query", "error", "message"),
    [
        ("fetch(", QuerySyntaxError, "ends too early at line 1, column 6"),
        ('fetch("x")\n  | map(rate 5m)', QuerySyntaxError, "line 2, column 14"),
        ("nope()", QueryTypeError, "unknown function 'nope'"),
        ('fetch("x", last=10)', QueryTypeError, "duration"),
        ('fetch("x", when=1)', QueryTypeError, "no argument when"),
        ('fetch("http.requests", last=10m) | map(rate)', QueryTypeError, "needs a window"),
        ('fetch("http.requests", last=10m) | reduce(avg)', QueryTypeError, "unknown aggregate 'avg'"),
        ('fetch("x{a=}")', QueryError, "needs a value"),
        ("map(1, rate, 5m)", QueryTypeError, "needs series"),
        ('fetch("http.requests", last=1d, resolution=60s)', QueryLimitError, "points"),
        ("", QuerySyntaxError, "empty"),
    ],
)
def test_errors_point_at_the_problem(evaluator: Evaluator, query: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        evaluator.evaluate(query)


def test_a_syntax_error_names_characters_and_shows_the_whole_line() -> None:
    query = 'fetch("http.requests", last=10m) | map(rate 1m) | reduce(sum, by=[method])'
    with pytest.raises(QuerySyntaxError) as caught:
        parse(query)
    assert str(caught.value) == (
        "syntax error at line 1, column 45; expected '(' or ')' or ',' or '='\n"
        + query
        + "\n"
        + " " * 44
        + "^"
    )
    with pytest.raises(QuerySyntaxError, match="ends too early at line 1, column 12; expected a name"):
        parse('fetch("a") |')


def test_wall_time_limit(evaluator: Evaluator) -> None:
    slow = Evaluator(evaluator.source, now_ms=NOW + MINUTE, limits=Limits(timeout_s=0.0))
    with pytest.raises(QueryLimitError, match="longer than"):
        slow.evaluate('fetch("http.requests", last=10m) | map(rate, 5m)')


ALPHABET = st.sampled_from(
    [*"fetchmaprdubkzlsy()[]{}|,=~!<>+-*/%^\"'. 0123456789_\n\tmshd#", "fetch", "map", "on", "bool"]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_random_text_gives_a_result_or_a_documented_error(evaluator: Evaluator, text: str) -> None:
    try:
        evaluator.evaluate(text)
    except QueryError:
        pass  # every refusal is a QueryError (syntax, type, matching or limit)
    except (ValueError, TypeError) as exc:  # pragma: no cover - what this test exists to catch
        raise AssertionError(f"undocumented {type(exc).__name__} for {text!r}: {exc}") from exc


def matrices(rows: int, cols: int) -> st.SearchStrategy[Matrix]:
    values = st.lists(
        st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32), st.none()),
        min_size=rows * cols,
        max_size=rows * cols,
    )
    labels = st.lists(
        st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2"]), max_size=3),
        min_size=rows,
        max_size=rows,
    )
    return st.builds(
        lambda v, lab: Matrix(
            ["x"] * rows,
            lab,
            np.arange(cols) * MINUTE,
            np.array([np.nan if x is None else x for x in v], dtype=float).reshape(rows, cols),
            MINUTE,
        ),
        values,
        labels,
    )


@settings(max_examples=150, deadline=None)
@given(
    matrices(4, 8),
    matrices(3, 8),
    st.sampled_from(["+", "-", "/", ">", "and", "or", "unless"]),
    st.sampled_from([None, ["a"], ["a", "b"]]),
    st.sampled_from([None, "left"]),
    st.sampled_from(["delta", "rate", "increase", "mean", "median", "max"]),
    st.sampled_from(["sum", "mean", "count", "stddev", "median"]),
)
def test_random_matrices_give_results_or_documented_errors(
    a: Matrix, b: Matrix, op: str, on: list[str] | None, group: str | None, mapper: str, aggregate: str
) -> None:
    with np.errstate(all="ignore"):
        for step in (
            lambda: apply_mapper(a, mapper, 2 * MINUTE),
            lambda: reduce_matrix(a, aggregate, by=on),
            lambda: bucketize(a, 4 * MINUTE, aggregate),
            lambda: apply_op(op, a, b, on=on, group=None if op in ("and", "or", "unless") else group),
        ):
            try:
                result = step()
            except (MatchingError, QueryTypeError):
                continue
            assert isinstance(result, Matrix)
            assert result.values.shape == (len(result), len(result.timestamps))


def test_parse_is_cached_and_never_evaluates_python() -> None:
    assert parse('fetch("x")') is parse('fetch("x")')
    with pytest.raises(QuerySyntaxError):
        parse("__import__('os').system('true')")
