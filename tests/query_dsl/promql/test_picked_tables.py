"""The query side's remembered tables (query_dsl/promql/selection.py, ``PickedTables``): a
table is reused only for the very label columns it was derived from, and the memo stays
within its bounds; and what a table derives (its order, its label texts, its name-less copy)
is made once, as are an aggregation's classes and answer table per grouping, a matching's
per pair of tables and a label function's per arguments."""

from __future__ import annotations

import numpy as np

from bookkeeper.ground import LabelColumn
from query_dsl import reduce
from query_dsl.matrix import Matrix
from query_dsl.promql import binary
from query_dsl.promql.aggregation import aggregate
from query_dsl.promql.ast import LabelMatcher, VectorMatching
from query_dsl.promql.binary import vector_op
from query_dsl.promql.functions import INSTANT_FUNCTIONS
from query_dsl.promql.labels import prometheus_order
from query_dsl.promql.parser import parse
from query_dsl.promql.selection import PickedTables, _Picked
from query_dsl.promql.small_body import metric_texts
from query_dsl.promql.values import String
from query_dsl.series_table import MEMO_MAX, SeriesTable, kept_for


def _picked(count: int) -> _Picked:
    labels = {"__name__": LabelColumn(["x"], np.zeros(count, dtype=np.int32))}
    table = SeriesTable.from_lists(["x"] * count, [{"i": str(i)} for i in range(count)])
    return _Picked(labels, table, None)


def _matchers(name: str) -> tuple[LabelMatcher, ...]:
    return (LabelMatcher("__name__", "=", name),)


def test_a_table_is_reused_only_for_the_columns_it_came_from() -> None:
    memo = PickedTables()
    picked = _picked(3)
    memo.keep(_matchers("x"), picked)
    assert memo.get(_matchers("x"), picked.labels) is picked
    assert memo.get(_matchers("x"), dict(picked.labels)) is None  # equal columns, another answer
    assert memo.get(_matchers("y"), picked.labels) is None


def test_the_memo_is_bounded_in_entries_and_series() -> None:
    memo = PickedTables(max_entries=3, max_series=80)
    kept = {name: _picked(2) for name in "abcde"}
    for name, picked in kept.items():
        memo.keep(_matchers(name), picked)
    assert len(memo) == 3 and memo.get(_matchers("a"), kept["a"].labels) is None
    memo.get(_matchers("c"), kept["c"].labels)  # used: d goes before it
    memo.keep(_matchers("f"), _picked(10))
    assert memo.get(_matchers("d"), kept["d"].labels) is None
    assert memo.get(_matchers("c"), kept["c"].labels) is not None
    for name in "ghi":
        memo.keep(_matchers(name), _picked(10))
    assert memo.series <= 80 and len(memo) <= 3
    large = _picked(11)  # over an eighth of the bound: kept only if the store remembers it
    memo.keep(_matchers("large"), large)
    assert memo.get(_matchers("large"), large.labels) is None
    memo.keep(_matchers("large"), large, remembered=True)
    assert memo.get(_matchers("large"), large.labels) is large
    huge = _picked(21)  # over a quarter of the bound: never kept
    memo.keep(_matchers("huge"), huge, remembered=True)
    assert memo.get(_matchers("huge"), huge.labels) is None
    assert memo.series == sum(len(entry.table) for entry in memo._entries.values())


def test_what_a_table_derives_is_made_once() -> None:
    table = SeriesTable.from_lists(["x"] * 4, [{"i": str(3 - i)} for i in range(4)])
    m = Matrix.from_table(table, np.arange(2), np.zeros((4, 2)), 1)
    order = prometheus_order(m)
    assert order.tolist() == [3, 2, 1, 0] and prometheus_order(m) is order
    assert not order.flags.writeable  # shared: never to be changed in place
    assert metric_texts(table) is metric_texts(table)
    assert table.with_name("") is table.with_name("") and table.with_name("y") is not table.with_name("")
    assert table.with_name("").name_list() == [""] * 4


def test_an_aggregations_classes_and_answer_table_are_made_once_per_grouping() -> None:
    table = SeriesTable.from_lists(["x"] * 6, [{"i": str(i % 3), "j": str(i)} for i in range(6)])
    m = Matrix.from_table(table, np.arange(2), np.arange(12, dtype=np.float64).reshape(6, 2), 1)
    by_i = aggregate(parse("sum by (i) (x)"), m, None)
    again = aggregate(parse("sum by (i) (x)"), m, None)
    assert again.table is by_i.table and metric_texts(again.table) is metric_texts(by_i.table)
    assert by_i.values.tolist() == [[6.0, 8.0], [10.0, 12.0], [14.0, 16.0]]
    assert by_i.table.label_dicts() == [{"i": "0"}, {"i": "1"}, {"i": "2"}]
    assert aggregate(parse("sum without (i) (x)"), m, None).table.label_dicts() == [
        {"j": str(j)} for j in range(6)
    ]
    assert aggregate(parse("max(x)"), m, None).values.tolist() == [[10.0, 11.0]]
    for labels in range(MEMO_MAX + 20):  # many groupings of one table: what it keeps stays bounded
        aggregate(parse(f"count by (l{labels}) (x)"), m, None)
    assert kept_for(table, reduce._GROUPINGS_SERIES) == MEMO_MAX
    assert 0 < len(table.derived("reduce_groupings", dict)) <= MEMO_MAX
    assert aggregate(parse("sum by (i) (x)"), m, None).values.tolist() == by_i.values.tolist()


def test_a_matchings_classes_and_answer_table_are_made_once_per_pair_of_tables() -> None:
    left = SeriesTable.from_lists(["x"] * 4, [{"i": str(i), "j": str(i % 2)} for i in range(4)])
    right = SeriesTable.from_lists(["y"] * 2, [{"j": str(j)} for j in range(2)])
    a = Matrix.from_table(left, np.arange(2), np.arange(8, dtype=np.float64).reshape(4, 2), 1)
    b = Matrix.from_table(right, np.arange(2), np.full((2, 2), 10.0), 1)
    on_j = VectorMatching("many-to-one", ("j",), on=True)
    sums = vector_op("+", a, b, on_j, as_bool=False)
    assert vector_op("-", a, b, on_j, as_bool=False).table is sums.table  # arithmetic: one table
    assert sums.values.tolist() == [[10.0, 11.0], [12.0, 13.0], [14.0, 15.0], [16.0, 17.0]]
    assert sums.table.name_list() == [""] * 4
    kept = vector_op(">", a, b, on_j, as_bool=False)  # a filter keeps the names: another table
    assert kept.table is not sums.table and len(kept) == 0
    assert vector_op("<", a, b, on_j, as_bool=False).table.name_list() == ["x"] * 4
    other = Matrix.from_table(right.with_name("z"), np.arange(2), np.zeros((2, 2)), 1)
    assert vector_op("+", a, other, on_j, as_bool=False).values.tolist() == a.values.tolist()
    for labels in range(MEMO_MAX + 20):  # many matchings of one table: what it keeps stays bounded
        vector_op("+", a, b, VectorMatching("many-to-one", ("j", f"l{labels}"), on=True), as_bool=False)
    assert kept_for(left, binary._MATCHINGS_SERIES) == MEMO_MAX
    assert 0 < len(left.derived("promql_matchings", dict)) <= MEMO_MAX


def test_a_label_functions_answer_table_is_made_once_per_table_and_arguments() -> None:
    table = SeriesTable.from_lists(["x"] * 3, [{"i": str(i), "j": "a"} for i in range(3)])
    m = Matrix.from_table(table, np.arange(2), np.arange(6, dtype=np.float64).reshape(3, 2), 1)

    def call(name: str, *texts: str) -> Matrix:
        found = INSTANT_FUNCTIONS[name]([m, *(String(text) for text in texts)], np.arange(2))
        assert isinstance(found, Matrix)
        return found

    joined = call("label_join", "k", "-", "i", "j")
    assert call("label_join", "k", "-", "i", "j").table is joined.table  # asked again: found
    assert joined.labels == [{"i": str(i), "j": "a", "k": f"{i}-a"} for i in range(3)]
    assert joined.names == ["x"] * 3 and joined.values.tolist() == m.values.tolist()
    assert call("label_join", "k", "+", "i", "j").labels[0]["k"] == "0+a"  # other arguments
    replaced = call("label_replace", "__name__", "y$1", "i", "(1)")
    assert call("label_replace", "__name__", "y$1", "i", "(1)").table is replaced.table
    assert replaced.names == ["x", "y1", "x"] and replaced.labels[1] == {"i": "1", "j": "a"}
    for number in range(MEMO_MAX + 20):  # many arguments over one table: what it keeps stays bounded
        call("label_join", "k", str(number), "i")
    assert 0 < len(table.derived("promql_relabeled", dict)) <= MEMO_MAX


def test_a_large_table_remembers_a_few_of_a_kind() -> None:
    large = SeriesTable.from_lists(["x"] * 70_000, [{}] * 70_000)
    assert kept_for(large, reduce._GROUPINGS_SERIES) == 8
    assert kept_for(large, binary._MATCHINGS_SERIES) == 8
