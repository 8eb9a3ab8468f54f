"""The finest ring's closed blocks: encoded a slice of columns per round by their deadline,
reopened by late writes (counted), and a block encoded by slices decodes as one."""

from __future__ import annotations

import time

import numpy as np

from vhms.server import Store
from vhms.server.codec import encode_block, join_blocks
from vhms.server.finest import FinestRing
from vhms.server.open_blocks import SLICE
from vhms.server.rings import CHUNK, encode_values

MINUTE = 60_000


def test_a_block_encoded_by_slices_decodes_as_one() -> None:
    rng = np.random.default_rng(3)
    stored = encode_values(np.round(rng.normal(50, 10, (12, 5000)), 2))
    stored[:, 1000:1500] = encode_values(np.cumsum(rng.poisson(5, (12, 500)), axis=0).astype(float))
    stored[rng.random(stored.shape) < 0.1] = 0  # empty buckets
    stored[:, 2100:2300] = 0  # series never written
    parts = [(first, encode_block(stored[:, first : first + 2048])) for first in range(0, 5000, 2048)]
    joined = join_blocks(parts, 5000)
    assert (joined.decode(np.arange(5000)) == stored).all()
    some = np.array([0, 1001, 2047, 2048, 2200, 4999, 5000])
    assert (joined.decode(some)[:, :-1] == stored[:, some[:-1]]).all() and not joined.decode(some)[
        :, -1
    ].any()


def _round(store: Store, ids: np.ndarray, at: int) -> None:
    store.apply(ids, np.full(len(ids), float(at // MINUTE % 1000)), np.full(len(ids), at))


def test_a_closed_block_is_encoded_a_share_per_round_by_its_deadline() -> None:
    count = CHUNK + 100  # two chunks: 8 slices and 1
    store = Store("60s:60", max_series=count, finest_horizon_ms=5 * MINUTE)
    ids = store.index.lookup([f"m{{i={i}}}" for i in range(count)])
    finest = store.rings[0]
    assert isinstance(finest, FinestRing)
    start = (int(time.time() * 1000) // MINUTE - 120) * MINUTE
    seen_open = False
    for number in range(100):
        before = {key: len(finest.open.partial.get(key, [])) for key in finest.open.open}
        _round(store, ids, start + number * MINUTE)
        slices = {key: -(-finest.plain.values[key[1]].shape[1] // SLICE) for key in before}
        encoded = sum(  # slices encoded in this round: those of the blocks left open, the rest of the others
            len(finest.open.partial.get(key, [])) - done if key in finest.open else slices[key] - done
            for key, done in before.items()
        ) + sum(len(finest.open.partial.get(key, [])) for key in finest.open.open if key not in before)
        assert encoded <= 1  # 9 slices over the 11 rounds before the deadline: one a round
        for number_, _ in finest.open.open:  # an open block is encoded before its plain rows are recycled
            assert number_ * finest.block + finest.plain.slots > finest.head
        seen_open |= bool(finest.open)
    assert seen_open and store.stats["finest_blocks_encoded"] > 0
    assert store.stats["finest_sealed_cells_written"] == 0  # rounds at the head write plain rows
    at = start + 99 * MINUTE
    result = store.fetch("m{i=16400}", at - 59 * MINUTE, at + MINUTE, resolution=60)
    assert (result.values[0] == [float(b % 1000) for b in range(at // MINUTE - 59, at // MINUTE + 1)]).all()


def test_a_late_sample_into_a_sealed_block_is_counted_and_kept() -> None:
    store = Store("60s:60", max_series=10, finest_horizon_ms=5 * MINUTE)
    ids = store.index.lookup([f"m{{i={i}}}" for i in range(10)])
    start = (int(time.time() * 1000) // MINUTE - 120) * MINUTE
    for number in range(60):
        _round(store, ids, start + number * MINUTE)
    finest = store.rings[0]
    assert isinstance(finest, FinestRing)
    finest.seal_open()
    late = start + 20 * MINUTE + 30_000  # 39 minutes behind the head: sealed
    assert finest.is_sealed(np.array([late // MINUTE])).all()
    assert store.apply(ids[:3], np.array([1.5, 2.5, 3.5]), np.full(3, late)) == 3
    assert store.stats["finest_sealed_cells_written"] == 3 and store.stats["finest_blocks_reopened"] == 1
    result = store.fetch("m{i=1}", late - 30_000, late + 30_000, resolution=60, sample_times=True)
    assert result.values[0, 0] == 2.5
    assert result.sample_times is not None and result.sample_times[0, 0] == late
