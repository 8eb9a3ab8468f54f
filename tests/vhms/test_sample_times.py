"""The finest ring keeps each sample's own time to the millisecond, for PromQL: a fetch with
``sample_times`` answers it, and a snapshot keeps it; a snapshot of before the millisecond
times (a one-byte offset in 1/254ths of the step) restores each offset's lower bound."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from vhms.server import Store, load_snapshot, save_snapshot


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
    exact = restored.fetch("x", base, base + 60_000, sample_times=True).sample_times
    assert exact is not None and exact[0].tolist() == times.tolist()


def test_samples_at_their_buckets_start_answer_the_starts_without_an_array_of_times() -> None:
    base = int(time.time()) // 15 * 15 * 1000 - 600_000
    store = Store("15s:100,1m:60")
    keys = [f"x{{i={i}}}" for i in range(3)] + [f"y{{i={i}}}" for i in range(20_000)]  # y: a second chunk
    for k in range(4):
        store.ingest(keys, np.arange(len(keys), dtype=np.float64) + k, np.full(len(keys), base + 15_000 * k))
    fetched = store.fetch("x", base, base + 60_000, sample_times=True)
    starts = base + 15_000 * np.arange(4)
    assert fetched.sample_times is not None and fetched.sample_times.strides[0] == 0  # a broadcast view
    assert (fetched.sample_times == starts).all() and fetched.values[:, 3].tolist() == [3.0, 4.0, 5.0]
    # one sample off its bucket's start, in the second chunk: every time read, that one to the ms
    store.ingest(["y{i=19999}"], np.array([7.0]), np.array([base + 45_000 + 123]))
    again = store.fetch("y", base, base + 60_000, sample_times=True)
    assert again.sample_times is not None and again.sample_times.strides[0] != 0
    expected = np.broadcast_to(starts, again.values.shape).copy()
    expected[-1, 3] += 123
    assert (again.sample_times == expected).all() and again.values[-1, 3] == 7.0
    assert np.isnan(store.fetch("x", base + 60_000, base + 120_000, sample_times=True).values).all()


def test_a_snapshot_with_one_byte_offsets_restores_their_lower_bound(tmp_path: Path) -> None:
    base = int(time.time()) // 15 * 15 * 1000 - 600_000
    store = Store("15s:100,1m:60")
    times = np.array([base, base + 15_000 + 1, base + 30_000 + 14_999, base + 45_000 + 7_777])
    store.ingest(["x{a=b}"] * 4, np.arange(4.0), times)
    save_snapshot(store, tmp_path)
    (data,) = tmp_path.glob("vhms-snapshot-*.npz")
    with np.load(data) as saved:
        arrays = dict(saved)
    millis = arrays.pop("ring0.times").astype(np.int64)
    written = ~np.isnan(arrays["ring0.values"])
    arrays["ring0.offsets"] = np.where(written, millis * 254 // 15_000 + 1, 0).astype(np.uint8)
    with open(data, "wb") as out:
        np.savez(out, **arrays)
    manifest_path = tmp_path / "vhms-snapshot.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["sha256"] = hashlib.sha256(data.read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest))
    restored = Store("15s:100,1m:60")
    assert load_snapshot(restored, tmp_path)
    approximate = restored.fetch("x", base, base + 60_000, sample_times=True).sample_times
    assert approximate is not None
    assert (approximate[0] <= times).all() and (times - approximate[0] < 15_000 / 254 + 1).all()
    assert approximate[0, 0] == times[0] and approximate[0].tolist() != times.tolist()


ROUNDS_PROGRAM = """
import sys
from pathlib import Path
import numpy as np
from vhms.server import Store

def anonymous() -> int:
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("RssAnon")) * 1024

offset, series = int(sys.argv[1]), 1 << 16
keys = [f"m{{i={i}}}" for i in range(series)]
start = (1_700_000_000_000 // 60_000) * 60_000
store = Store("60s:60", max_series=series, finest_horizon_ms=3_600_000)  # all plain: nothing sealed
store.ingest(keys, np.zeros(series), np.full(series, start + offset))
before = anonymous()
for minute in range(1, 60):
    store.ingest(keys, np.full(series, float(minute)), np.full(series, start + minute * 60_000 + offset))
print(anonymous() - before)
"""


def test_samples_at_their_buckets_start_cost_no_pages_of_times() -> None:
    """An agent's rounds are at the minute: their offsets are 0, what an empty cell reads, and
    are never written, so their times take no memory (59 rounds of 65,536 series: 7.4 MiB
    of uint16 times when the samples are 1 ms past the minute)."""
    grown = {}
    for offset in (0, 1):
        done = subprocess.run(
            [sys.executable, "-c", ROUNDS_PROGRAM, str(offset)],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        grown[offset] = int(done.stdout)
    times_bytes = 59 * (1 << 16) * 2
    assert grown[1] - grown[0] > times_bytes * 0.8
