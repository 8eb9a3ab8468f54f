"""The finest ring keeps each sample's own time to the millisecond, for PromQL: a fetch with
``sample_times`` answers it; after a snapshot restore, the one-byte offset's lower bound."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from vhms import Store, load_snapshot, save_snapshot


def test_sample_times_survive_to_the_millisecond(tmp_path: Path) -> None:
    base = int(time.time()) // 15 * 15 * 1000 - 600_000
    store = Store("15s:100,1m:60")
    times = np.array([base, base + 15_000 + 1, base + 30_000 + 14_999, base + 45_000 + 7_777])
    store.ingest(["x{a=b}"] * 4, np.arange(4.0), times)
    fetched = store.fetch("x", base, base + 60_000, sample_times=True)
    assert fetched.sample_times is not None
    assert fetched.sample_times[0].tolist() == times.tolist()
    assert store.fetch("x", base, base + 60_000).sample_times is None
    assert store.fetch("x", base, base + 60_000, resolution=60, sample_times=True).sample_times is None
    # an older sample in the same bucket leaves the newer one and its time in place
    store.ingest(["x{a=b}"], np.array([9.0]), np.array([base + 45_000 + 10]))
    again = store.fetch("x", base, base + 60_000, sample_times=True)
    assert (
        again.values[0, 3] == 3.0 and again.sample_times is not None and again.sample_times[0, 3] == times[3]
    )
    save_snapshot(store, tmp_path / "snap")
    restored = Store("15s:100,1m:60")
    assert load_snapshot(restored, tmp_path / "snap")
    approximate = restored.fetch("x", base, base + 60_000, sample_times=True).sample_times
    assert approximate is not None
    assert (np.abs(approximate[0] - times) <= 15_000 / 254 + 1).all()
    assert approximate[0, 0] == times[0]
