"""The index finds a batch's series by the hashes of their rows of codes, confirmed against
the stored rows, and a batch seen before whole (``SeriesIndex._batches``): the same ids as a
dict keyed by series would give, whatever changed between rounds (a series replaced, the
order, repeats), and never the ids of another series whose row merely hashes alike."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vhms.server import index as index_module
from vhms.server.index import _MEMO_MIN, SeriesIndex
from vhms.server.key_table import KeyTable
from vhms.server.symbols import row_hashes

POOL = [f"cpu.load{{host=h{i},rack=r{i % 7}}}" for i in range(400)]


def _expected(reference: dict[str, int], keys: list[str]) -> list[int]:
    """Ids as a dict would give them: a new key the next id, in order of first appearance."""
    return [reference.setdefault(key, len(reference)) for key in keys]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(0, len(POOL) - 1), min_size=_MEMO_MIN, max_size=3 * _MEMO_MIN),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 3),
)
def test_rounds_of_batches_get_the_ids_a_dict_would(batches: list[list[int]], rounds: int) -> None:
    index = SeriesIndex()
    reference: dict[str, int] = {}
    for _ in range(rounds):
        for batch in batches:
            keys = [POOL[i] for i in batch]
            assert index.lookup(keys).tolist() == _expected(reference, keys)
    assert len(index) == len(reference)


def test_a_batch_seen_before_is_found_whole() -> None:
    index = SeriesIndex()
    ids = index.lookup(POOL[:100])
    assert len(index._batches) == 1
    index._shape_rows.clear()  # nothing is resolved again: the remembered ids answer
    assert index.lookup(POOL[:100]).tolist() == ids.tolist()


def test_a_batch_with_one_key_changed_creates_it_and_keeps_the_rest() -> None:
    index = SeriesIndex()
    keys = POOL[:100]
    first = index.lookup(keys).tolist()
    changed = [*keys[:50], "cpu.load{host=new,rack=r0}", *keys[51:]]
    assert index.lookup(changed).tolist() == [*first[:50], 100, *first[51:]]
    assert index.lookup(list(reversed(changed))).tolist() == [*first[:50], 100, *first[51:]][::-1]


def test_the_memo_is_bounded() -> None:
    index = SeriesIndex()
    index.lookup(POOL)
    for start in range(0, 300):  # 300 distinct batches of 100 keys: 30,000 ids remembered at most
        index.lookup(POOL[start : start + 100])
    assert index._batch_ids == sum(len(ids) for ids in index._batches.values())
    assert index._batch_ids <= max(2 * len(index), 1 << 20)


def test_a_batch_with_refused_keys_is_not_remembered() -> None:
    index = SeriesIndex(max_series=50)
    ids = index.lookup(POOL[:100])
    assert (ids[50:] == -1).all() and not index._batches
    assert index.lookup(POOL[:100]).tolist() == ids.tolist()
    assert index.refused == 100


def _few_hashes(shape: int, rows: np.ndarray) -> np.ndarray:
    """Row hashes narrowed to 5 values: every lookup meets rows of the same hash."""
    return row_hashes(shape, rows) % 5 + 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=150), min_size=1, max_size=5))
def test_series_whose_hashes_collide_keep_their_own_ids(batches: list[list[int]]) -> None:
    index = SeriesIndex()
    reference: dict[str, int] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_module, "row_hashes", _few_hashes)
        for _ in range(2):
            for batch in batches:
                keys = [POOL[i] for i in batch]
                assert index.lookup(keys).tolist() == _expected(reference, keys)
    assert len(index) == len(reference) and index.keys_of(np.arange(len(index))) == list(reference)


def _crowded(value: int) -> int:
    """Hashes that share their low bits in groups of 375: long runs of probing."""
    return value << 20 | value % 8


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sets(st.integers(1, 3000), max_size=400), min_size=1, max_size=6))
def test_the_hash_table_finds_what_was_inserted_and_nothing_else(rounds: list[set[int]]) -> None:
    table = KeyTable()
    reference: dict[int, int] = {}
    probe = np.array([_crowded(value) for value in range(1, 3001)], dtype=np.int64)
    for values in rounds:
        new = np.array(sorted({_crowded(value) for value in values} - set(reference)), dtype=np.int64)
        ids = np.arange(len(reference), len(reference) + len(new), dtype=np.int64)
        table.insert(new, ids)
        reference.update(zip(new.tolist(), ids.tolist(), strict=True))
        assert table.find(probe).tolist() == [reference.get(h, -1) for h in probe.tolist()]
    assert table.count == len(reference) and 2 * table.count <= len(table.hashes)
