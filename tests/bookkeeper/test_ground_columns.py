"""The one label-column type and the one series hash (bookkeeper/ground/columns.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bookkeeper.ground import (
    LabelColumn,
    concat,
    dense_classes,
    key_hashes,
    row_keys,
    series_hashes,
    translate,
)
from bookkeeper.wire import format_labels, series_keys

_NAMES = st.sampled_from(["cpu.load", "mem.free", "http.requests", "q:x"])
_KEYS = st.sampled_from(["host", "dc", "path", "method"])
_VALUES = st.text(alphabet="ab,={} %'é", min_size=1, max_size=4)
_LABELS = st.dictionaries(_KEYS, _VALUES, max_size=3)


@settings(max_examples=60, deadline=None)
@given(
    common=_LABELS,
    names=st.lists(_NAMES, min_size=1, max_size=3, unique=True),
    sets=st.lists(_LABELS, min_size=1, max_size=4),
    rows=st.lists(st.tuples(st.integers(0, 10), st.integers(0, 10)), max_size=20),
)
def test_the_series_hash_of_columns_is_the_hash_of_the_canonical_key(
    common: dict[str, str], names: list[str], sets: list[dict[str, str]], rows: list[tuple[int, int]]
) -> None:
    label_sets = [format_labels(labels) for labels in sets]
    name_ids = np.array([n % len(names) for n, _ in rows], dtype=np.int32)
    set_ids = np.array([s % len(label_sets) for _, s in rows], dtype=np.int32)
    by_columns = series_hashes(common, names, label_sets, name_ids, set_ids)
    keys = series_keys(common, names, label_sets, name_ids, set_ids)
    assert by_columns.tolist() == key_hashes(keys).tolist()
    # equal exactly when the series are equal (no collision among these few)
    assert len(set(by_columns.tolist())) == len(set(keys))


def test_the_series_hash_depends_on_both_name_and_labels() -> None:
    hashes = key_hashes(["a{x=1}", "b{x=1}", "a{x=2}", "a{}"]).tolist()
    assert len(set(hashes)) == 4
    assert key_hashes(["a{x=1}"]).tolist() == hashes[:1]  # the same in every call


def test_translate_and_concat_keep_the_first_numbering_and_absence() -> None:
    left = LabelColumn(["a", "b"], np.array([0, 1, -1], dtype=np.int32))
    right = LabelColumn(["c", "a"], np.array([1, 0, -1], dtype=np.int32))
    values, codes = translate(left, right)
    assert values == ["a", "b", "c"] and codes.tolist() == [0, 2, -1]
    joint = concat([left, right, LabelColumn.absent(2)])
    assert joint.values == ["a", "b", "c"]
    assert joint.codes.tolist() == [0, 1, -1, 0, 2, -1, -1, -1]


def test_row_keys_are_equal_exactly_when_rows_agree_on_every_column() -> None:
    first = LabelColumn(["x", "y"], np.array([0, 0, 1, -1, 0], dtype=np.int32))
    second = LabelColumn(["p"], np.array([0, 0, 0, 0, -1], dtype=np.int32))
    classes, firsts = dense_classes(row_keys([first, second], 5))
    assert classes.tolist() == [0, 0, 1, 2, 3] and firsts.tolist() == [0, 2, 3, 4]


def test_row_keys_renumber_before_they_overflow() -> None:
    wide = LabelColumn([str(i) for i in range(1 << 20)], np.arange(8, dtype=np.int32) % 3)
    keys = row_keys([wide] * 5, 8)  # (2**20)**5 would overflow an int64
    assert dense_classes(keys)[0].tolist() == [0, 1, 2, 0, 1, 2, 0, 1]


def test_compact_keeps_only_the_values_in_use() -> None:
    column = LabelColumn(["a", "b", "c", "d"], np.array([3, -1], dtype=np.int32))
    assert column.compact().values == ["d"] and column.compact().codes.tolist() == [0, -1]
    assert column.take(np.array([0])).values == ["d"]
