"""The cache of decoded sealed blocks: what it counts, what it keeps, what it forgets."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from vhms.server import Store, load_snapshot, save_snapshot
from vhms.server import store as store_module
from vhms.server.codec import encode_block
from vhms.server.decoded import DecodedBlocks
from vhms.server.rings import encode_values


def _block(series: int, buckets: int = 12, seed: int = 0) -> tuple[np.ndarray, object]:
    rng = np.random.default_rng(seed)
    stored = encode_values(np.round(rng.normal(50, 10, (buckets, series)), 2))
    stored[rng.random(stored.shape) < 0.1] = 0  # empty buckets
    return stored, encode_block(stored)


def test_a_few_columns_decoded_then_merged_then_the_whole_chunk() -> None:
    stats: Counter[str] = Counter()
    cache = DecodedBlocks(1 << 20, stats)
    stored, block = _block(1000)
    for local in ([5, 17, 900], [5, 6, 7], [5, 6, 7, 900], [6, 7], [5, 17]):  # [5, 6, 7]: a run, 6 and 7 new
        assert (cache.read((300_000, 1, 0), block, np.array(local)) == stored[:, local]).all()
    assert stats == Counter(decoded_cache_misses=2, decoded_cache_hits=3)
    assert cache.bytes == 12 * 5 * 8  # five distinct columns, merged into one entry
    every = np.arange(0, 1000, 2)  # half the columns: the whole block decoded
    assert (cache.read((300_000, 1, 0), block, every) == stored[:, every]).all()
    assert cache.bytes == stored.nbytes
    assert (cache.read((300_000, 1, 0), block, np.arange(10, 20)) == stored[:, 10:20]).all()
    assert stats["decoded_cache_hits"] == 4


def test_series_newer_than_the_block_read_as_empty() -> None:
    cache = DecodedBlocks(1 << 20, Counter())
    stored, block = _block(100)
    read = cache.read((300_000, 1, 0), block, np.array([98, 99, 100, 150]))
    assert (read[:, :2] == stored[:, 98:]).all() and not read[:, 2:].any()


def test_least_recently_used_evicted_past_the_budget() -> None:
    stats: Counter[str] = Counter()
    stored, block = _block(100)
    cache = DecodedBlocks(2 * stored.nbytes, stats)
    everything = np.arange(100)
    for number in (1, 2, 1, 3):  # block 2 is the least recently used when block 3 comes
        cache.read((300_000, number, 0), block, everything)
    assert stats["decoded_cache_evictions"] == 1 and len(cache) == 2
    cache.read((300_000, 1, 0), block, everything)
    cache.read((300_000, 2, 0), block, everything)
    assert stats["decoded_cache_hits"] == 2 and stats["decoded_cache_misses"] == 4
    assert cache.bytes <= cache.budget


def test_no_budget_keeps_nothing_and_still_answers() -> None:
    cache = DecodedBlocks(0, Counter())
    stored, block = _block(50)
    assert (cache.read((300_000, 1, 0), block, np.arange(50)) == stored).all()
    assert len(cache) == 0 and cache.bytes == 0
    with pytest.raises(ValueError, match="budget >= 0"):
        DecodedBlocks(-1, Counter())


def test_forget_a_chunk_a_block_or_a_ring() -> None:
    stats: Counter[str] = Counter()
    cache = DecodedBlocks(1 << 20, stats)
    _, block = _block(10)
    for key in [(300_000, 1, 0), (300_000, 1, 1), (300_000, 2, 0), (900_000, 1, 0)]:
        cache.read(key, block, np.arange(10))
    cache.forget(300_000, 1, 1)
    assert len(cache) == 3
    cache.forget(300_000, 1)
    assert len(cache) == 2
    cache.forget(300_000)
    assert len(cache) == 1 and stats["decoded_cache_invalidations"] == 3
    assert cache.bytes == 12 * 10 * 8


def test_a_store_reads_through_it_and_a_late_sample_invalidates() -> None:
    minute = 60_000
    now = int(time.time() * 1000) // (60 * minute) * (60 * minute)
    store = Store("60s:10,5m:8")  # blocks of 2 five-minute buckets
    for m in range(40):
        store.ingest(["a{}", "b{}"], np.array([m, -m], dtype=np.float64), np.full(2, now - (40 - m) * minute))
    start, end = now - 40 * minute, now
    first = store.fetch("b", start, end, resolution=300)
    again = store.fetch("b", start, end, resolution=300)
    assert (first.values == again.values).all() and first.values[0, 0] == -4
    assert store.stats["decoded_cache_hits"] > 0 and len(store.decoded)
    late = now - 38 * minute  # in the oldest sealed bucket, empty for c: its `last` takes the sample
    store.ingest(["c{}"], np.array([7.0]), np.array([late]))
    assert store.fetch("c", start, end, resolution=300).values[0, 0] == 7.0
    assert store.stats["decoded_cache_invalidations"] > 0
    assert store.fetch("b", start, end, resolution=300).values[0, 0] == -4


def test_a_snapshot_reads_past_the_cache(tmp_path: Path) -> None:
    minute = 60_000
    now = int(time.time() * 1000) // (60 * minute) * (60 * minute)
    store = Store("60s:10,5m:8", decoded_cache_bytes=1 << 20)
    for m in range(40):
        store.ingest(["a{}", "b{}"], np.array([m, -m], dtype=np.float64), np.full(2, now - (40 - m) * minute))
    store.fetch("b", now - 40 * minute, now, resolution=300)
    before = (dict(store.stats), store.decoded.bytes)
    save_snapshot(store, tmp_path)  # every sealed block decoded once, none kept
    assert (dict(store.stats), store.decoded.bytes) == before
    restored = Store("60s:10,5m:8")
    assert load_snapshot(restored, tmp_path)
    ours, theirs = (s.fetch("", now - 40 * minute, now, resolution=300) for s in (store, restored))
    assert (ours.values.view(np.uint64) == theirs.values.view(np.uint64)).all()


def _hour_of(series: int, store: Store) -> tuple[int, int]:
    """``series`` series over 40 minutes into ``store``; the span to read."""
    minute = 60_000
    now = int(time.time() * 1000) // (60 * minute) * (60 * minute)
    keys = [f"s{{i={i}}}" for i in range(series)]
    for m in range(40):
        store.ingest(keys, np.full(series, float(m)), np.full(series, now - (40 - m) * minute))
    return now - 40 * minute, now


def test_the_budget_grows_with_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """By default the cache may hold a share of what the store holds (past a floor), as
    the store grows; a budget given stays."""
    monkeypatch.setattr(store_module, "DECODED_PER_SERIES", 1 << 20)  # past the floor at 33 series
    grows, fixed = Store("60s:10,5m:8"), Store("60s:10,5m:8", decoded_cache_bytes=1 << 20)
    for store in (grows, fixed):
        start, end = _hour_of(40, store)
        store.fetch("s", start, end, resolution=300)
    assert grows.decoded.budget == 40 << 20
    assert fixed.decoded.budget == 1 << 20
