"""Series created a batch at a time from its symbol table (``vhms/server/symbols.py``) are
the series the key-by-key parse names: a series is its name and its sorted labels (a key
spelled otherwise, its labels unsorted or a value escaped needlessly, is the same series as
its canonical form); same labels by code, same postings, same refusals and errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bookkeeper import InvalidLabelError, InvalidNameError
from bookkeeper.wire import format_series, parse_series
from vhms.selector import parse_selector
from vhms.server.index import NAME, SeriesIndex

_values = st.text(alphabet=st.sampled_from("ab1,={}% éx"), min_size=1, max_size=4)
_labels = st.dictionaries(st.sampled_from(["dc", "host", "rack", "a.b", "k-1"]), _values, max_size=4)
_canonical = st.builds(format_series, st.sampled_from(["cpu", "mem.used", "x:y", "_z"]), _labels)
# keys no canonical form writes, which the slow parse still reads (or refuses), and a value
# spelled two ways (k=%61 and k=a: one posting)
_odd = st.sampled_from(
    ["n{}", "n{a=1,a=2}", "n{a={}", "n{k=a=b}", "n{a=%ZZ}", "m{b=2,a=1}", "n{a=}}", "n{k=%61}", "p{k=a}"]
)


def _labels_of(index: SeriesIndex, series_id: int) -> dict[str, str]:
    columns = index.columns(np.array([series_id]))
    return {label: values[codes[0]] for label, (values, codes) in columns.items() if codes[0] >= 0}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(_canonical, _odd), min_size=1, max_size=40), st.integers(1, 5))
def test_bulk_creation_matches_the_key_by_key_parse(keys: list[str], batches: int) -> None:
    index = SeriesIndex()
    size = -(-len(keys) // batches)
    ids = np.concatenate([index.lookup(keys[i : i + size]) for i in range(0, len(keys), size)])
    assert (ids >= 0).all()
    canonical = [format_series(*parse_series(key)) for key in keys]
    assert len(index) == len(set(canonical))
    assert index.keys_of(ids) == canonical  # each series its own id, repeats the same
    stored = index.keys_of(np.arange(len(index)))
    for key in set(keys):
        name, labels = parse_series(key)
        assert _labels_of(index, index.lookup([key])[0]) == {NAME: name, **labels}
    for label in index.label_names():
        for value in index.label_values(label):
            picked = index.match(parse_selector(f'{{{label}="{_quoted(value)}"}}'))
            expected = [i for i, key in enumerate(stored) if parse_series(key)[1].get(label) == value]
            assert picked.tolist() == expected
    assert index.lookup(keys).tolist() == ids.tolist()  # a second round finds them all


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def test_a_bad_key_raises_as_the_parse_does_and_its_batch_creates_nothing() -> None:
    for bad, error in [
        ("{x=1}", InvalidNameError),
        ("a{x}", InvalidLabelError),
        ("a{x=%ff}", InvalidLabelError),
    ]:
        index = SeriesIndex()
        with pytest.raises(error):
            index.lookup(["ok{a=1}", bad])
        assert len(index) == 0


def test_max_series_refuses_the_newest_per_occurrence() -> None:
    index = SeriesIndex(max_series=3)
    ids = index.lookup(["a{x=1}", "b{x=1}", "c{x=1}", "d{x=1}", "d{x=1}", "a{x=1}"])
    assert ids.tolist() == [0, 1, 2, -1, -1, 0]
    assert index.refused == 2
    assert index.match(parse_selector("{x=1}")).tolist() == [0, 1, 2]


_mixed = st.sampled_from(
    [*(f"a{{x={i}}}" for i in range(8)), *(f"b{{x={i},y={i % 3}}}" for i in range(8)), "c{}"]
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_mixed, min_size=1, max_size=40), min_size=1, max_size=4), st.integers(1, 20))
def test_batches_of_several_shapes_number_new_series_in_order_of_first_appearance(
    batches: list[list[str]], max_series: int
) -> None:
    index = SeriesIndex(max_series=max_series)
    reference: dict[str, int] = {}
    refused = 0
    for keys in batches:
        expected = []
        for key in keys:
            if key not in reference and len(reference) < max_series:
                reference[key] = len(reference)
            expected.append(reference.get(key, -1))
            refused += key not in reference
        assert index.lookup(keys).tolist() == expected
    assert index.refused == refused and index.keys_of(np.arange(len(index))) == list(reference)
    assert index.match(parse_selector("{x~.+}")).tolist() == [
        i for i, key in enumerate(reference) if "x=" in key
    ]


def test_postings_of_a_label_with_more_values_than_16_bits_hold() -> None:
    index = SeriesIndex()
    keys = [f"m{{h={i},k={i % 7}}}" for i in range(70_000)]
    shuffled = [keys[(i * 7919) % len(keys)] for i in range(len(keys))]  # 7919 is prime to 70,000
    index.lookup(shuffled[:30_000])
    index.lookup(shuffled[30_000:])  # codes 30,000 to 69,999 in one batch
    for i in (0, 65_535, 65_536, 69_999):
        assert index.keys_of(index.match(parse_selector(f'm{{h="{i}"}}'))) == [keys[i]]
    sevens = index.match(parse_selector('m{k="3"}'))
    assert len(sevens) == 10_000 and (np.diff(sevens) > 0).all()
