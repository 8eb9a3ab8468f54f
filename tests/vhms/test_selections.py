"""The store's remembered selections (vhms/server/selections.py): a selector asked again
reads its series from the cache while the index holds the same series, a new series makes
it match again, and the cache stays within its bounds."""

from __future__ import annotations

import time
from collections import Counter

import numpy as np

from vhms.server import Store
from vhms.server.selections import Selection, Selections


def _now_ms() -> int:
    return int(time.time()) // 60 * 60_000


def _keys(result: object) -> list[str]:
    return sorted(result.keys)  # type: ignore[attr-defined]


def test_a_selector_asked_again_is_remembered_until_a_new_series_arrives() -> None:
    now = _now_ms()
    store = Store("60s:10")
    store.ingest(["cpu{host=a}", "cpu{host=b}", "mem{host=a}"], np.array([1.0, 2.0, 3.0]), np.full(3, now))
    first = store.fetch("cpu", now - 60_000, now + 1)
    again = store.fetch("cpu", now - 60_000, now + 1)
    assert _keys(first) == _keys(again) == ["cpu{host=a}", "cpu{host=b}"]
    assert again.labels is first.labels  # the same columns, not read again
    assert not first.labels["host"].codes.flags.writeable  # shared: a change would raise
    assert store.stats["selection_cache_hits"] == 1 and store.stats["selection_cache_misses"] == 1

    store.ingest(["cpu{host=c}"], np.array([4.0]), np.full(1, now))  # a new series: match again
    grown = store.fetch("cpu", now - 60_000, now + 1)
    assert _keys(grown) == ["cpu{host=a}", "cpu{host=b}", "cpu{host=c}"]
    assert grown.values[:, -1].tolist() == [1.0, 2.0, 4.0]
    assert store.stats["selection_cache_misses"] == 2

    store.ingest(["cpu{host=a}"], np.array([5.0]), np.full(1, now + 60_000))  # new samples only: remembered
    later = store.fetch("cpu", now - 60_000, now + 60_001)
    assert later.labels is grown.labels and later.values[0, -2:].tolist() == [1.0, 5.0]


def test_a_series_of_another_name_also_makes_a_regex_selector_match_again() -> None:
    now = _now_ms()
    store = Store("60s:10")
    store.ingest(["cpu_a{}"], np.array([1.0]), np.full(1, now))
    assert len(store.fetch("~cpu.*", now, now + 1)) == 1
    store.ingest(["cpu_b{}"], np.array([2.0]), np.full(1, now))
    assert _keys(store.fetch("~cpu.*", now, now + 1)) == ["cpu_a{}", "cpu_b{}"]


def _selection(count: int, generation: int = 0) -> Selection:
    return Selection(generation, np.arange(count, dtype=np.int64), {})


def test_the_cache_is_bounded_in_entries_and_in_series() -> None:
    stats: Counter[str] = Counter()
    cache = Selections(stats, max_entries=3, max_series=40)
    for n in range(5):
        cache.keep(f"s{n}", _selection(2))
    assert len(cache) == 3 and stats["selection_cache_evictions"] == 2
    assert cache.get("s0", 0) is None and cache.get("s4", 0) is not None

    cache.get("s2", 0)  # used: the least recently used (s3) goes first
    cache.keep("big", _selection(10))
    assert cache.get("s3", 0) is None and cache.get("s2", 0) is not None
    cache.keep("big2", _selection(10))
    cache.keep("big3", _selection(10))
    assert cache.series <= 40 and len(cache) <= 3

    cache.keep("huge", _selection(11))  # more than a quarter of the bound: never kept
    assert cache.get("huge", 0) is None
    assert cache.series == sum(len(e.ids) for e in cache._entries.values())


def test_the_bound_grows_with_the_store() -> None:
    """A store of more series than the bound keeps as large a share of them: a selection
    of up to a quarter of its series, up to as many ids in all as it has series."""
    cache = Selections(Counter(), max_series=40)
    assert not cache.keep("small store", _selection(11, generation=30))  # a quarter of 40 is 10
    assert cache.keep("large store", _selection(11, generation=100))
    assert cache.get("large store", 100) is not None
    assert not cache.keep("larger still", _selection(26, generation=100))
    for n in range(4):
        assert cache.keep(f"s{n}", _selection(25, generation=100))
    assert cache.series <= 100


def test_an_entry_of_another_generation_is_a_miss() -> None:
    cache = Selections(Counter())
    cache.keep("cpu", _selection(2, generation=5))
    assert cache.get("cpu", 6) is None
    assert cache.get("cpu", 5) is not None
    cache.keep("cpu", _selection(3, generation=6))  # replaces it
    assert len(cache) == 1 and cache.series == 3
