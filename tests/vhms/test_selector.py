from __future__ import annotations

import time

import numpy as np
import pytest

from vhms import SelectorError, parse_selector
from vhms.server import Store

NOW = int(time.time() * 1000) // 60_000 * 60_000


@pytest.fixture(scope="module")
def store() -> Store:
    store = Store()
    keys = []
    for dc in ("jb", "par"):
        for rack in ("r1", "r10", "r2"):
            for env in ("prod", "dev"):
                keys.append(f"http.requests{{dc={dc},env={env},rack={rack}}}")
                keys.append(f"memcached.hits{{dc={dc},env={env},rack={rack}}}")
    keys.append("http.errors{dc=jb}")  # no rack, no env
    store.ingest(keys, np.ones(len(keys)), np.full(len(keys), NOW))
    return store


def names(store: Store, selector: str) -> set[str]:
    return set(store.index.keys_of(store.select(selector)))


@pytest.mark.parametrize(
    ("selector", "count"),
    [
        ("", 25),
        ("memcached.hits", 12),
        ("memcached.hits{dc=jb}", 6),
        ("~http\\..*", 13),
        ("~http\\..*{dc=jb, rack~r1.*, env!=dev}", 2),
        ("{rack=r1}", 8),
        ("{rack~r1}", 8),  # anchored: r10 does not match r1
        ("{rack!~r1.*}", 9),  # r2 ones, and the series without a rack
        ("{env!=dev}", 13),  # the series without env are kept
        ("{dc=jb, rack=r2, env=prod}", 2),
        ("nothing", 0),
        ("memcached.hits{dc=nowhere}", 0),
        ('{rack="r1"}', 8),
    ],
)
def test_every_operator(store: Store, selector: str, count: int) -> None:
    assert len(names(store, selector)) == count


def test_regex_is_anchored_and_negation_keeps_unlabeled(store: Store) -> None:
    assert names(store, "{env!=prod, dc=jb}") >= {"http.errors{dc=jb}"}
    assert all(key.endswith("rack=r1}") for key in names(store, "{rack~r1}"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x{a}", "column 3"),
        ("x{a=b", "missing '}'"),
        ("9x", "not a variable name"),
        ("x{a~(}", "bad regex"),
        ("x{a=b}junk", "unexpected 'junk'"),
        ('x{a="open}', "unterminated"),
        ("x{a=}", "needs a value"),
    ],
)
def test_bad_selectors_say_where(text: str, message: str) -> None:
    with pytest.raises(SelectorError, match=message):
        parse_selector(text)


def test_selecting_100k_of_a_large_index_is_fast() -> None:
    store = Store(max_series=300_000)
    keys = [f"m{{dc={'jb' if i % 3 == 0 else 'par'},host=h{i},rack=r{i % 50}}}" for i in range(300_000)]
    store.index.lookup(keys)
    started = time.perf_counter()
    ids = store.index.match(parse_selector("m{dc=jb, rack~r1.*}"))
    elapsed = time.perf_counter() - started
    assert len(ids) == sum(1 for i in range(300_000) if i % 3 == 0 and str(i % 50).startswith("1"))
    assert elapsed < 1.0  # generous: the benchmark measures it properly
