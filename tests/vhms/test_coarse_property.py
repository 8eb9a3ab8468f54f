"""The compressed rings (the coarse ones and the finest one's sealed blocks, sample times
too) answer exactly as plain ones: the same batches (random series, counters with resets,
decimals, full floats, flat runs, gaps, stale markers, -0.0 and infinities, late samples into
sealed blocks, jumps over every ring boundary) ingested into a store and into its twin whose
rings are plain (``PlainRing``, the layout before compression; the finest ring with a horizon
of its whole retention) give the same bits at every resolution, in stitched sample reads,
after a snapshot, and in replicas that caught up from the compressed store (holding a later
part of the batches themselves)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vhms.server import Store, load_snapshot, save_snapshot
from vhms.server.catchup import merge_chunk, read_chunk
from vhms.server.coarse import CoarseRing
from vhms.server.rings import CHUNK, PlainRing

MINUTE = 60_000
NOW = int(time.time() * 1000) // MINUTE * MINUTE
STALE = np.array([0x7FF0000000000002], dtype=np.uint64).view(np.float64)[0]
RESOLUTIONS = [
    "60s:10,5m:8,15m:12,1h:6",
    "60s:7,5m:9:max,15m:5:min,30m:8:sum",
    "60s:6,3m:10:mean,9m:7:count,27m:9",
    "60s:60,5m:48,15m:96,1h:72",
    "5s:480,5m:8,15m:12,1h:6",  # a fine step: the finest ring's blocks of 10 minutes (120 buckets)
]
SELECTORS = ["m{i=3}", "m{i~3|7|11|16400}", ""]
_FOREVER = 10**12  # a horizon past any retention


def _plain_twin(resolutions: str, series: int) -> Store:
    """A store whose rings are all plain: the coarse ones ``PlainRing``s, the finest one a
    horizon of its whole retention (nothing sealed)."""
    store = Store(resolutions, max_series=series, max_series_per_query=series, finest_horizon_ms=_FOREVER)
    store.rings[1:] = [PlainRing(r, timed=False) for r in store.resolutions[1:]]
    return store


def _values(rng: np.random.Generator, kinds: np.ndarray, state: np.ndarray) -> np.ndarray:
    """This round's value of each series, by its kind (counters keep ``state``)."""
    state += rng.poisson(50, len(state)) * (rng.random(len(state)) > 0.1)
    state[rng.random(len(state)) < 0.02] = 0  # counter resets
    values = np.select(
        [kinds == 0, kinds == 1, kinds == 2],
        [state.astype(np.float64), np.round(rng.normal(20, 5, len(state)), 2), rng.random(len(state)) * 1e3],
        np.float64(7.0),  # flat
    )
    special = rng.random(len(values))
    values[special < 0.03] = STALE
    values[(special >= 0.03) & (special < 0.04)] = -0.0
    values[(special >= 0.04) & (special < 0.045)] = np.inf
    return values


def _same(compressed: Store, plain: Store, end_ms: int) -> None:
    for ring in compressed.resolutions:
        start = end_ms - ring.span_s * 1000
        for selector in SELECTORS:  # a few columns of a block decoded, more merged in, then all
            ours = compressed.fetch(selector, start, end_ms, resolution=ring.step_s)
            theirs = plain.fetch(selector, start, end_ms, resolution=ring.step_s)
            assert ours.keys == theirs.keys
            assert (
                np.ascontiguousarray(ours.values).view(np.uint64)
                == np.ascontiguousarray(theirs.values).view(np.uint64)
            ).all(), (ring, selector)
    span = compressed.resolutions[-1].span_s * 1000
    ours = compressed.fetch("", end_ms - span, end_ms, sample_times=True)
    theirs = plain.fetch("", end_ms - span, end_ms, sample_times=True)
    assert ours.coarse_spans == theirs.coarse_spans
    assert (ours.values.view(np.uint64) == theirs.values.view(np.uint64)).all()
    assert ours.sample_times is not None and theirs.sample_times is not None
    assert (ours.sample_times == theirs.sample_times).all()


def _caught_up(peer: Store, replicas: tuple[Store, Store], end_ms: int) -> None:
    """Both replicas (compressed, plain) merge the peer's chunks and then answer alike."""
    first = 0
    size = 40_000 if peer.series < CHUNK else 4 << 20  # several calls; one across a chunk of series
    while first < peer.series:
        data, following, _ = read_chunk(peer, first, size)
        for replica in replicas:
            merge_chunk(replica, data, first)
        first = following
    _same(*replicas, end_ms)


def _run(resolutions: str, seed: int, series: int, rounds: int, tmp: Path, cache: int, horizon: int) -> None:
    rng = np.random.default_rng(seed)
    compressed = Store(
        resolutions,
        max_series=series,
        max_series_per_query=series,
        decoded_cache_bytes=cache,
        finest_horizon_ms=horizon,
    )
    plain = _plain_twin(resolutions, series)
    assert all(isinstance(ring, CoarseRing) for ring in compressed.rings[1:])
    keys = [f"m{{i={i}}}" for i in range(series)]
    kinds = rng.integers(0, 4, series)
    state = rng.integers(0, 10**6, series)
    replicas = (
        Store(
            resolutions,
            max_series=series,
            max_series_per_query=series,
            decoded_cache_bytes=cache,
            finest_horizon_ms=horizon,
        ),
        _plain_twin(resolutions, series),
    )
    retention = compressed.resolutions[-1].span_s * 1000
    now = NOW - retention - 3 * 3600_000
    for number in range(rounds):
        step = rng.choice([1, 1, 1, 3, 7, 31, 97, 400]) * MINUTE
        now = min(now + int(step), NOW)
        chosen = np.flatnonzero(rng.random(series) < 0.7)
        values = _values(rng, kinds, state)[chosen]
        times = now + rng.integers(0, MINUTE, len(chosen))
        if rng.random() < 0.3:  # late samples: some into the finest ring, some into sealed blocks
            times = times - rng.integers(0, retention + 2 * 3600_000, len(chosen))
        batch = ([keys[i] for i in chosen], values, times)
        assert compressed.ingest(*batch) == plain.ingest(*batch)
        if number >= rounds * 3 // 4:  # the replicas were down before
            assert replicas[0].ingest(*batch) == replicas[1].ingest(*batch)
        if number % 10 == 9:
            _same(compressed, plain, now + MINUTE)
    _same(compressed, plain, now + MINUTE)
    _caught_up(compressed, replicas, now + MINUTE)
    save_snapshot(compressed, tmp)
    restored = Store(resolutions, max_series=series, max_series_per_query=series, finest_horizon_ms=horizon)
    assert load_snapshot(restored, tmp)
    _same(restored, plain, now + MINUTE)
    late = ([keys[0], keys[-1]], np.array([1.5, 2.5]), np.array([now - retention // 2, now - retention // 3]))
    assert restored.ingest(*late) == plain.ingest(*late)
    _same(restored, plain, now + MINUTE)


@settings(max_examples=12, deadline=None)
@given(
    resolutions=st.sampled_from(RESOLUTIONS),
    seed=st.integers(0, 2**32 - 1),
    cache=st.sampled_from([0, 4096, 64 << 20]),  # none; entries evicted, some too big to keep; all kept
    horizon=st.sampled_from([MINUTE, 5 * MINUTE]),  # the finest ring's: two buckets (the least), five
)
def test_compressed_rings_answer_as_plain_ones(
    tmp_path_factory: pytest.TempPathFactory, resolutions: str, seed: int, cache: int, horizon: int
) -> None:
    tmp = tmp_path_factory.mktemp("snapshot")
    _run(resolutions, seed, series=37, rounds=120, tmp=tmp, cache=cache, horizon=horizon)


def test_a_fine_step_seals_blocks_of_ten_minutes(tmp_path: Path) -> None:
    """A 5 s finest ring seals blocks of 120 buckets (ten minutes), past MAX_BLOCK's 24."""
    assert Store("5s:480,5m:8,15m:12,1h:6").rings[0].block == 120
    _run(
        "5s:480,5m:8,15m:12,1h:6", seed=11, series=37, rounds=80, tmp=tmp_path, cache=1 << 20, horizon=MINUTE
    )


def test_across_chunks(tmp_path: Path) -> None:
    """Series past the first chunk of 16,384 have blocks of their own chunk."""
    _run(
        "60s:10,5m:8,15m:12,1h:6",
        seed=5,
        series=CHUNK + 40,
        rounds=40,
        tmp=tmp_path,
        cache=1 << 20,
        horizon=MINUTE,
    )
