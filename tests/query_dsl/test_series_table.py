"""Series identity by columns (SeriesTable) against label dicts: parsing keys in bulk, the
store index's columns, equivalence classes from codes, and the frameworks built on them
(reduce, matching, set operators, filters, top) against the per-series dict computations
they replaced, on random label sets with missing labels."""

from __future__ import annotations

import json
import math
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bookkeeper.labels import format_series, parse_series
from query_dsl import MatchingError, Matrix, apply_op, filter_selector, reduce_matrix, top
from query_dsl.aggregates import aggregate
from query_dsl.http.answer import encode_answer
from query_dsl.series_table import SeriesTable, joint_classes
from vhms.server import Store

STEP = 60_000
NOW = int(time.time() * 1000) // STEP * STEP
LABELS = ["a", "b", "c"]

label_sets = st.dictionaries(st.sampled_from(LABELS), st.sampled_from(["1", "2"]), max_size=3)


@st.composite
def matrices(draw: st.DrawFn, max_rows: int = 7) -> Matrix:
    rows = draw(st.integers(0, max_rows))
    cols = draw(st.integers(1, 4))
    names = draw(st.lists(st.sampled_from(["x", "y"]), min_size=rows, max_size=rows))
    labels = draw(st.lists(label_sets, min_size=rows, max_size=rows))
    cells = st.one_of(st.sampled_from([np.nan, np.inf, -np.inf, 0.0]), st.floats(-1e6, 1e6))
    values = draw(st.lists(cells, min_size=rows * cols, max_size=rows * cols))
    return Matrix(names, labels, np.arange(cols) * STEP, np.array(values).reshape(rows, cols), STEP)


def by_columns(m: Matrix) -> Matrix:
    """The same series, its identity held only by columns (as a fetch makes it)."""
    return Matrix.from_table(SeriesTable.from_lists(m.names, m.labels), m.timestamps, m.values, m.step_ms)


def same(got: Matrix, names: list[str], labels: list[dict[str, str]], values: np.ndarray) -> None:
    assert got.names == names
    assert got.labels == labels
    np.testing.assert_array_equal(got.values, values.reshape(len(names), len(got.timestamps)))


# -- the computations the columns replaced: per series, over label dicts ----------------------


def dict_key(labels: dict[str, str], on: list[str] | None, ignoring: list[str] | None) -> tuple:
    if on is not None:
        return tuple((k, labels[k]) for k in sorted(on) if k in labels)
    return tuple(sorted((k, v) for k, v in labels.items() if k not in (ignoring or ())))


def dict_reduce(m: Matrix, name: str, by: list[str] | None, without: list[str] | None) -> tuple:
    classes: dict[tuple, list[int]] = {}
    for row, labels in enumerate(m.labels):
        if by is not None:
            key: tuple = tuple(labels.get(label) for label in by)
        elif without is not None:
            key = tuple(sorted((k, v) for k, v in labels.items() if k not in without))
        else:
            key = ()
        classes.setdefault(key, []).append(row)
    names, label_sets_, rows = [], [], []
    for members in classes.values():
        first, rest = m.labels[members[0]], [m.labels[i] for i in members[1:]]
        label_sets_.append({k: v for k, v in first.items() if all(o.get(k) == v for o in rest)})
        member_names = {m.names[i] for i in members}
        names.append(member_names.pop() if len(member_names) == 1 else "")
        with np.errstate(all="ignore"):
            rows.append(aggregate(name, m.values[members], 0))
    return names, label_sets_, np.array(rows).reshape(len(rows), len(m.timestamps))


def dict_match(op: str, a: Matrix, b: Matrix, on: list[str] | None, group: str | None) -> tuple:
    def index(m: Matrix) -> dict[tuple, list[int]]:
        classes: dict[tuple, list[int]] = {}
        for row, labels in enumerate(m.labels):
            classes.setdefault(dict_key(labels, on, None), []).append(row)
        return classes

    def describe(key: tuple) -> str:
        return "{" + ",".join(f"{k}={v}" for k, v in key) + "}"

    left, right = index(a), index(b)
    many, one = (left, right) if group != "right" else (right, left)
    for key, rows in one.items():
        if len(rows) > 1:
            side = "right" if group != "right" else "left"
            raise MatchingError(f"{len(rows)} series on the {side} side share {describe(key)}")
    if group is None:
        for key, rows in many.items():
            if len(rows) > 1 and key in one:
                raise MatchingError(f"{len(rows)} series on the left share {describe(key)}")
    names, labels, left_rows, right_rows = [], [], [], []
    for key, many_rows in many.items():
        if key in one:
            for many_row in many_rows:
                pair = (many_row, one[key][0]) if group != "right" else (one[key][0], many_row)
                left_rows.append(pair[0])
                right_rows.append(pair[1])
                if group is None:
                    labels.append(dict(key))
                else:
                    labels.append(a.labels[many_row] if group == "left" else b.labels[many_row])
                names.append(a.names[pair[0]] if op == ">" else "")
    with np.errstate(all="ignore"):
        if op == ">":
            left_values, right_values = a.values[left_rows], b.values[right_rows]
            truth = np.greater(left_values, right_values) & ~np.isnan(left_values) & ~np.isnan(right_values)
            values = np.where(truth, left_values, np.nan).reshape(len(left_rows), len(a.timestamps))
            kept = [row for row in range(len(values)) if not np.isnan(values[row]).all()]  # a filter drops
            return [names[r] for r in kept], [labels[r] for r in kept], values[kept]
        else:
            values = np.divide(a.values[left_rows], b.values[right_rows])
    return names, labels, values


def dict_set_op(op: str, a: Matrix, b: Matrix, on: list[str] | None) -> tuple:
    right: dict[tuple, list[int]] = {}
    for row, labels in enumerate(b.labels):
        right.setdefault(dict_key(labels, on, None), []).append(row)
    left_keys = {dict_key(labels, on, None) for labels in a.labels}
    rows = [r for r, labels in enumerate(a.labels) if (dict_key(labels, on, None) in right) == (op == "and")]
    if op == "and":
        values = [
            np.where(
                ~np.isnan(b.values[right[dict_key(a.labels[r], on, None)]]).all(axis=0), a.values[r], np.nan
            )
            for r in rows
        ]
        return [a.names[r] for r in rows], [a.labels[r] for r in rows], np.array(values)
    if op == "unless":
        return [a.names[r] for r in rows], [a.labels[r] for r in rows], a.values[rows]
    extra = [r for r, labels in enumerate(b.labels) if dict_key(labels, on, None) not in left_keys]
    return (
        a.names + [b.names[r] for r in extra],
        a.labels + [b.labels[r] for r in extra],
        np.vstack([a.values, b.values[extra]]),
    )


# -- building tables ---------------------------------------------------------------------------

label_values = st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"]), min_size=1, max_size=8)
names_ = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.:\-]{0,6}", fullmatch=True)
keys_ = st.builds(
    format_series, names_, st.dictionaries(st.sampled_from(["a", "b", "dc", "x.y"]), label_values, max_size=4)
)


def series_key(series: tuple[str, dict[str, str]]) -> str:
    return format_series(*series)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(names_, label_sets), min_size=1, max_size=20, unique_by=series_key))
def test_the_store_index_gives_the_labels_of_what_it_fetched(
    series: list[tuple[str, dict[str, str]]],
) -> None:
    store = Store("60s:5")
    keys = [format_series(name, labels) for name, labels in series]
    half = len(keys) // 2
    store.ingest(keys[:half], np.ones(half), np.full(half, NOW))
    first = store.fetch("{}", NOW - STEP, NOW + 1)
    store.ingest(keys[half:], np.ones(len(keys) - half), np.full(len(keys) - half, NOW))  # grows after
    for selector, result in (
        ("{}", first),
        ("{}", store.fetch("{}", NOW - STEP, NOW + 1)),
        ("{a=1}", store.fetch("{a=1}", NOW - STEP, NOW + 1)),
    ):
        table = SeriesTable.from_fetch(result)
        expected = [parse_series(key) for key in store.series_keys(selector)][: len(result)]
        assert table.name_list() == [name for name, _ in expected]
        assert table.label_dicts() == [labels for _, labels in expected]


def test_the_index_hands_over_columns_while_new_series_arrive() -> None:
    """Reading the codes (numpy over the index's arrays) and adding series (which grows those
    arrays) take turns: neither fails nor sees half of the other."""
    store = Store("60s:5", max_series=100_000, max_series_per_query=100_000)
    store.ingest([f"m{{i={i},s=a}}" for i in range(100)], np.ones(100), np.full(100, NOW))
    done = threading.Event()
    failures: list[BaseException] = []

    def grow() -> None:
        try:
            for batch in range(200):
                keys = [f"m{{i={i},s=b{batch % 3}}}" for i in range(batch * 50, batch * 50 + 50)]
                store.ingest(keys, np.ones(50), np.full(50, NOW))
        except BaseException as exc:  # pragma: no cover - what this test exists to catch
            failures.append(exc)
        finally:
            done.set()

    writer = threading.Thread(target=grow)
    writer.start()
    reads = 0
    while not done.is_set() or reads < 5:
        result = store.fetch("m", NOW - STEP, NOW + 1)
        table = SeriesTable.from_fetch(result)
        assert table.label_dicts() == [parse_series(key)[1] for key in store.series_keys("m")][: len(result)]
        reads += 1
    writer.join(timeout=60)
    assert not failures and not writer.is_alive()


def test_a_few_series_of_a_store_with_many_values_carry_only_their_own_values() -> None:
    """What reads a column's values (the JSON answer, filters, label dicts) costs what the
    series hold, not the store: a few series keep only the values they use."""
    store = Store("60s:5", max_series=5000, max_series_per_query=5000)
    keys = [f"m{{host=h{i},rack=r{i % 7}}}" for i in range(3000)]
    store.ingest(keys, np.arange(3000.0), np.full(3000, NOW))
    few = SeriesTable.from_fetch(store.fetch("m{host~h1[0-9]}", NOW - STEP, NOW + 1))
    assert len(few.columns["host"].values) == 10 and few.label_dicts()[0] == {"host": "h10", "rack": "r3"}
    everything = Matrix.from_table(
        SeriesTable.from_fetch(result := store.fetch("m", NOW - STEP, NOW + 1)),
        result.timestamps,
        result.values,
        STEP,
    )
    best = top(everything, 3)
    assert [len(c.values) for c in best.table.columns.values()] == [3, 3]
    assert best.labels == [{"host": f"h{i}", "rack": f"r{i % 7}"} for i in (2999, 2998, 2997)]
    per_rack = reduce_matrix(everything, "sum", by=["rack"])
    assert len(per_rack.table.columns["host"].values) == 0 and len(per_rack) == 7


# -- classes from codes ------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(label_sets, max_size=12), st.lists(st.sampled_from([*LABELS, "z"]), max_size=4))
def test_classes_from_codes_are_the_classes_of_label_dicts(
    labels: list[dict[str, str]], by: list[str]
) -> None:
    table = SeriesTable.from_lists(["x"] * len(labels), labels)
    classes, first = table.groups(by)
    seen: dict[tuple, int] = {}
    expected = [seen.setdefault(tuple(lab.get(k) for k in by), len(seen)) for lab in labels]
    assert classes.tolist() == expected
    assert first.tolist() == [expected.index(c) for c in range(len(seen))]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(label_sets, max_size=8),
    st.lists(label_sets, max_size=8),
    st.one_of(st.none(), st.lists(st.sampled_from([*LABELS, "z"]), max_size=3)),
)
def test_joint_classes_of_two_tables_are_the_classes_of_label_dicts(
    left: list[dict[str, str]], right: list[dict[str, str]], on: list[str] | None
) -> None:
    a = SeriesTable.from_lists(["x"] * len(left), left)
    b = SeriesTable.from_lists(["y"] * len(right), list(reversed(right)))  # other dictionaries
    labels = sorted(set(on)) if on is not None else sorted(set(a.columns) | set(b.columns))
    got_a, got_b = joint_classes(a, b, labels)
    keys = [dict_key(lab, on, None) for lab in [*left, *reversed(right)]]
    got = [*got_a.tolist(), *got_b.tolist()]
    for i, j in np.ndindex(len(keys), len(keys)):
        assert (got[i] == got[j]) == (keys[i] == keys[j])


@given(
    st.lists(label_sets, max_size=8),
    st.one_of(st.none(), st.lists(st.sampled_from([*LABELS, "z"]), max_size=3)),
)
def test_a_table_with_itself_numbers_as_with_a_copy_of_itself(
    labels: list[dict[str, str]], on: list[str] | None
) -> None:
    a = SeriesTable.from_lists(["x"] * len(labels), labels)
    chosen = sorted(set(on)) if on is not None else sorted(a.columns)
    itself = joint_classes(a, a, chosen)
    copy = joint_classes(a, a.take(np.arange(len(a))), chosen)
    assert [side.tolist() for side in itself] == [side.tolist() for side in copy]


def test_many_values_renumber_instead_of_overflowing() -> None:
    count = 3000
    labels = [{f"l{k}": str(i % (k + 2000)) for k in range(6)} for i in range(count)]
    table = SeriesTable.from_lists(["x"] * count, labels)
    classes, first = table.groups([f"l{k}" for k in range(6)])  # 2001^6 exceeds int64: renumbered
    assert len(first) == count and classes.tolist() == list(range(count))


# -- the frameworks over columns, against the dict computations --------------------------------


@settings(max_examples=200, deadline=None)
@given(
    matrices(),
    st.sampled_from(["sum", "mean", "count", "min", "max", "median", "last"]),
    st.sampled_from([None, ["a"], ["a", "b"], ["z"]]),
    st.booleans(),
)
def test_reduce_over_codes_equals_reduce_over_dicts(
    m: Matrix, name: str, labels: list[str] | None, without: bool
) -> None:
    by, excluded = (None, labels) if without else (labels, None)
    got = reduce_matrix(by_columns(m), name, by=by, without=excluded)
    names, label_sets_, values = dict_reduce(m, name, by, excluded)
    assert got.names == names and got.labels == label_sets_
    np.testing.assert_allclose(got.values, values, rtol=1e-12, equal_nan=True)


def test_reduce_adds_runs_of_adjacent_members_and_scattered_ones_alike() -> None:
    labels = [{"rack": r} for r in ["r1", "r1", "r2", "r2", "r1", "r3", "r2"]]
    values = np.arange(7 * 3, dtype=float).reshape(7, 3)
    values[2, 1] = np.nan
    m = Matrix(["x"] * 7, labels, np.arange(3) * STEP, values, STEP)
    for name in ("sum", "mean", "count", "min", "max"):
        names, label_sets_, expected = dict_reduce(m, name, ["rack"], None)
        same(reduce_matrix(m, name, by=["rack"]), names, label_sets_, expected)
        adjacent = reduce_matrix(m.select([0, 1, 4, 2, 3, 6, 5]), name, by=["rack"])
        np.testing.assert_allclose(adjacent.values, expected, equal_nan=True)


@settings(max_examples=300, deadline=None)
@given(
    matrices(),
    matrices(),
    st.sampled_from(["/", ">"]),
    st.sampled_from([None, ["a"], ["a", "b"], ["c", "z"]]),
    st.sampled_from([None, "left", "right"]),
)
def test_matching_over_codes_equals_matching_over_dicts(
    a: Matrix, b: Matrix, op: str, on: list[str] | None, group: str | None
) -> None:
    b = Matrix(b.names, b.labels, a.timestamps, np.resize(b.values, (len(b), len(a.timestamps))), STEP)
    if group is None and (len(a) == 1) != (len(b) == 1):
        return  # a singleton applies to every series of the other side: not matching
    try:
        expected = dict_match(op, a, b, on, group)
    except MatchingError as exc:
        with pytest.raises(MatchingError) as raised:
            apply_op(op, by_columns(a), by_columns(b), on=on, group=group)
        assert str(raised.value).startswith(str(exc))
        return
    got = apply_op(op, by_columns(a), by_columns(b), on=on, group=group)
    assert isinstance(got, Matrix)
    same(got, *expected)


@settings(max_examples=200, deadline=None)
@given(
    matrices(),
    matrices(),
    st.sampled_from(["and", "or", "unless"]),
    st.sampled_from([None, ["a"], ["b", "c"]]),
)
def test_set_operators_over_codes_equal_set_operators_over_dicts(
    a: Matrix, b: Matrix, op: str, on: list[str] | None
) -> None:
    b = Matrix(b.names, b.labels, a.timestamps, np.resize(b.values, (len(b), len(a.timestamps))), STEP)
    got = apply_op(op, by_columns(a), by_columns(b), on=on)
    assert isinstance(got, Matrix)
    same(got, *dict_set_op(op, a, b, on))


@settings(max_examples=200, deadline=None)
@given(matrices(), st.sampled_from(["x", "~x|y{a=1}", "{a!=1, b~1|2}", "{c!~2}", "y{z=1}", "{}"]))
def test_filters_over_codes_equal_filters_over_dicts(m: Matrix, selector: str) -> None:
    from vhms.selector import parse_selector

    matchers = [
        x for x in (parse_selector(selector).name, *parse_selector(selector).matchers) if x is not None
    ]
    rows = [
        r
        for r, (name, labels) in enumerate(zip(m.names, m.labels, strict=True))
        if all(x.matches(name if x.label == "__name__" else labels.get(x.label)) for x in matchers)
    ]
    same(
        filter_selector(by_columns(m), selector),
        [m.names[r] for r in rows],
        [m.labels[r] for r in rows],
        m.values[rows],
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([1.0, 2.0, 3.0, np.nan, -np.inf, np.inf]), max_size=12),
    st.integers(0, 14),
    st.booleans(),
)
def test_top_and_bottom_rank_as_a_stable_sort(last: list[float], k: int, largest: bool) -> None:
    m = Matrix(["x"] * len(last), [{"i": str(i)} for i in range(len(last))], [0], np.array(last), STEP)
    keys = np.where(np.isnan(last), -np.inf if largest else np.inf, last) if last else np.zeros(0)
    order = np.argsort(keys, kind="stable")
    expected = [i for i in (order[::-1] if largest else order)[:k].tolist() if not math.isnan(last[i])]
    assert [int(lab["i"]) for lab in top(m, k, largest=largest).labels] == expected


# -- the JSON answer ---------------------------------------------------------------------------


def records(m: Matrix) -> list[dict]:
    finite = [[v if math.isfinite(v) else None for v in row] for row in m.values.tolist()]
    return [
        {"name": n, "labels": dict(sorted(lab.items())), "timestamps": m.timestamps.tolist(), "values": row}
        for n, lab, row in zip(m.names, m.labels, finite, strict=True)
    ]


@settings(max_examples=200, deadline=None)
@given(matrices())
def test_the_json_answer_written_by_columns_decodes_to_the_records(m: Matrix) -> None:
    body = json.loads(encode_answer(by_columns(m), 1.5, ["why"]))
    assert body == {"series": records(m), "step_ms": STEP, "took_ms": 1.5, "warnings": ["why"], "strings": []}


def test_the_json_answer_of_awkward_text_empty_axes_and_numbers() -> None:
    text = ['quote " back \\ slash', "tab\there", "é ☃ \U0001f600", "</script>"]
    m = Matrix(text, [{"k": t, "j": "1"} for t in text], np.zeros(0), np.zeros((4, 0)), STEP)
    assert json.loads(encode_answer(m, 0.0))["series"] == records(m)
    empty = Matrix([], [], [0, STEP], np.zeros((0, 2)), STEP)
    assert json.loads(encode_answer(empty, 2.0)) == {
        "series": [],
        "step_ms": STEP,
        "took_ms": 2.0,
        "warnings": [],
        "strings": [],
    }
    for scalar, expected in ((0.25, 0.25), (math.nan, None), (math.inf, None)):
        assert json.loads(encode_answer(scalar, 1.0)) == {
            "scalar": expected,
            "took_ms": 1.0,
            "warnings": [],
            "strings": [],
        }
    tiny = Matrix(["x"], [{}], [0, 1], np.array([[1e-300, -0.0]]), 1)
    assert json.loads(encode_answer(tiny, 0.0))["series"][0]["values"] == [1e-300, -0.0]
