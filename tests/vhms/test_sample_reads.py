"""A read of the finest ring's values and sample times in one pass
(:func:`vhms.server.sample_reads.fill_samples`) is bit for bit its fill of the values and
then of the times, wherever the cells lie: plain rows (the ring wrapped), open blocks in the
plain part or decoded by a late write, sealed blocks through the cache or around it, buckets
outside the retention, series of two chunks."""

from __future__ import annotations

import numpy as np
import pytest

from vhms.server import Store
from vhms.server.finest import FinestRing
from vhms.server.rings import CHUNK
from vhms.server.sample_reads import fill_samples

MINUTE = 60_000


def _compare(finest: FinestRing, rng: np.random.Generator, ids: np.ndarray, reads: int) -> None:
    for _ in range(reads):
        picked = np.sort(rng.choice(ids, size=int(rng.integers(1, min(len(ids), 40) + 1)), replace=False))
        first = finest.head - int(rng.integers(-5, finest.slots + 20))
        buckets = np.arange(first, first + int(rng.integers(1, finest.slots + 30)), dtype=np.int64)
        values = np.zeros((len(buckets), len(picked)), dtype=np.uint64)
        times = np.zeros((len(buckets), len(picked)), dtype=finest.time_dtype)
        finest.fill(picked, buckets, values, decoded=True)
        finest.fill(picked, buckets, times, times=True)
        got = rng.integers(0, 1 << 63, size=values.shape, dtype=np.uint64)  # anything: every cell written
        got_times = np.zeros_like(times)
        fill_samples(finest, picked, (first, len(buckets)), (got, got_times))
        assert (got == values).all()
        assert (got_times == times).all()


@pytest.mark.parametrize("cache_bytes", [64 << 20, 0])
def test_one_pass_reads_what_two_fills_read(cache_bytes: int) -> None:
    rng = np.random.default_rng(27)
    store = Store(
        "60s:96", max_series=CHUNK + 40, finest_horizon_ms=10 * MINUTE, decoded_cache_bytes=cache_bytes
    )
    names = [f"m{{i={i}}}" for i in range(CHUNK + 40)]
    ids = store.index.lookup(names)[np.r_[0:30, CHUNK - 5 : CHUNK + 40]]
    finest = store.rings[0]
    assert isinstance(finest, FinestRing)
    start = (1_795_000_000_000 // MINUTE - 400) * MINUTE
    for number in range(300):
        written = ids[rng.random(len(ids)) < 0.8]  # gaps
        values = np.round(rng.normal(50, 10, len(written)), 2)
        values[rng.random(len(written)) < 0.05] = np.nan
        at = (
            start + number * MINUTE + rng.integers(0, 3, len(written)) * rng.integers(1, MINUTE, len(written))
        )
        store.apply(written, values, at)
        if number % 37 == 36:
            late = ids[rng.random(len(ids)) < 0.2]  # into closed blocks: decoded to take them
            back = start + (number - int(rng.integers(15, 80))) * MINUTE + int(rng.integers(0, MINUTE))
            store.apply(late, np.full(len(late), 7.5), np.full(len(late), back))
            _compare(finest, rng, ids, 30)
        if number % 101 == 100:
            finest.seal_open()
            _compare(finest, rng, ids, 30)
    assert store.stats["finest_blocks_encoded"] > 0 and store.stats["finest_blocks_reopened"] > 0
    _compare(finest, rng, ids, 60)
