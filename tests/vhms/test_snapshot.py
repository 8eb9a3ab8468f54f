from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from vhms import SnapshotError
from vhms.server import Store, load_snapshot, restore_or_empty, save_snapshot
from vhms.server.store import CHUNK

MINUTE = 60_000
NOW = int(time.time() * 1000) // MINUTE * MINUTE


def filled() -> Store:
    store = Store()
    keys = [f"disk.used{{host=h{i},volume=/data}}" for i in range(70_000)]  # two chunks
    for m in range(5):
        store.ingest(keys, np.arange(70_000) * 1.0 + m, np.full(70_000, NOW - (4 - m) * MINUTE))
    store.strings[3] = (NOW, "une valeur")
    return store


def test_round_trip(tmp_path: Path) -> None:
    original = filled()
    save_snapshot(original, tmp_path)
    restored = Store()
    assert load_snapshot(restored, tmp_path)
    for resolution in (60, 300, 900, 3600):
        a = original.fetch("disk.used{host~h6999.}", NOW - 60 * MINUTE, NOW + MINUTE, resolution)
        b = restored.fetch("disk.used{host~h6999.}", NOW - 60 * MINUTE, NOW + MINUTE, resolution)
        assert a.keys == b.keys and np.array_equal(a.values, b.values, equal_nan=True)
    assert restored.strings == original.strings
    assert [r.head for r in restored.rings] == [r.head for r in original.rings]
    restored.ingest(["disk.used{host=h1,volume=/data}"], np.array([9.0]), np.array([NOW]))  # keeps working
    assert restored.fetch("disk.used{host=h1}", NOW, NOW + MINUTE).values[0, 0] == 9.0


def test_a_snapshot_copies_the_series_stored_not_the_room_of_the_chunks(tmp_path: Path) -> None:
    store = Store("1s:600")  # one chunk: room for 65,536 series, 600 buckets each (350 MB)
    keys = [f"cpu.load{{host=h{i}}}" for i in range(100)]
    for second in range(5):
        store.ingest(keys, np.arange(100) + second * 1.0, np.full(100, NOW + second * 1000))
    tracemalloc.start()
    try:
        save_snapshot(store, tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    chunk_bytes = 600 * CHUNK * 10  # float64 values and uint16 sample times
    assert peak < chunk_bytes / 20, f"{peak / 2**20:.1f} MiB for 100 series"
    restored = Store("1s:600")
    assert load_snapshot(restored, tmp_path)
    a = store.fetch("cpu.load", NOW, NOW + 5000, 1)
    b = restored.fetch("cpu.load", NOW, NOW + 5000, 1)
    assert a.keys == b.keys and np.array_equal(a.values, b.values, equal_nan=True)


def test_no_snapshot_is_not_an_error(tmp_path: Path) -> None:
    assert load_snapshot(Store(), tmp_path) is False


def test_an_empty_store_snapshot_loads(tmp_path: Path) -> None:
    save_snapshot(Store(), tmp_path)
    restored = Store()
    assert restore_or_empty(restored, tmp_path) is True  # not set aside as corrupt
    assert restored.series == 0 and not list(tmp_path.glob("*.corrupt-*"))
    restored.ingest(["x{}"], np.array([1.0]), np.array([NOW]))
    assert restored.fetch("x", NOW, NOW + MINUTE).values.tolist() == [[1.0]]


def test_an_empty_store_snapshot_written_before_the_fix_loads(tmp_path: Path) -> None:
    """Such a snapshot holds its rings as arrays of shape (0, 0), not (slots, 0)."""
    save_snapshot(Store(), tmp_path)
    (data,) = tmp_path.glob("vhms-snapshot-*.npz")
    with np.load(data) as arrays:
        old = {
            name: np.zeros((0, 0), dtype=arrays[name].dtype) if arrays[name].ndim == 2 else arrays[name]
            for name in arrays.files
        }
    with open(data, "wb") as out:
        np.savez(out, **old)
    manifest = json.loads((tmp_path / "vhms-snapshot.json").read_text())
    manifest["sha256"] = hashlib.sha256(data.read_bytes()).hexdigest()
    (tmp_path / "vhms-snapshot.json").write_text(json.dumps(manifest))
    assert load_snapshot(Store(), tmp_path) is True


def test_a_corrupt_snapshot_is_detected_reported_and_set_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    save_snapshot(filled(), tmp_path)
    (data,) = tmp_path.glob("vhms-snapshot-*.npz")
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))
    with pytest.raises(SnapshotError, match="corrupt: SHA-256"):
        load_snapshot(Store(), tmp_path)
    store = Store()
    with caplog.at_level(logging.ERROR):
        assert restore_or_empty(store, tmp_path) is False
    assert "starting without the snapshot" in caplog.text
    assert store.series == 0
    assert sorted(p.name.split(".corrupt-")[0] for p in tmp_path.iterdir()) == [
        data.name,
        "vhms-snapshot.json",
    ]
    store.ingest(["x{}"], np.array([1.0]), np.array([NOW]))  # and the store works
    assert store.series == 1


@pytest.mark.parametrize("damage", ["truncate", "manifest", "resolutions"])
def test_other_damage_is_refused_with_a_reason(tmp_path: Path, damage: str) -> None:
    save_snapshot(filled(), tmp_path)
    store = Store()
    if damage == "truncate":
        (data,) = tmp_path.glob("vhms-snapshot-*.npz")
        data.write_bytes(data.read_bytes()[:1000])
        match = "corrupt"
    elif damage == "manifest":
        (tmp_path / "vhms-snapshot.json").write_text("{not json")
        match = "not a snapshot manifest"
    else:
        store = Store("60s:30,1h:24")
        match = "resolutions"
    with pytest.raises(SnapshotError, match=match):
        load_snapshot(store, tmp_path)


def test_a_crash_before_the_manifest_leaves_the_previous_snapshot_whole(tmp_path: Path) -> None:
    first = filled()
    save_snapshot(first, tmp_path)
    (previous,) = tmp_path.glob("vhms-snapshot-*.npz")
    bigger = filled()
    bigger.ingest(["late{}"], np.array([2.0]), np.array([NOW]))
    save_snapshot(bigger, tmp_path / "elsewhere")
    (written,) = (tmp_path / "elsewhere").glob("*.npz")
    # what a crash after the next data file's rename and before the manifest's leaves behind
    shutil.copy(written, tmp_path / "vhms-snapshot-99999999999999.npz")
    restored = Store()
    assert load_snapshot(restored, tmp_path) is True
    assert restored.series == first.series == bigger.series - 1
    save_snapshot(bigger, tmp_path)  # the next snapshot removes both older data files
    assert len(list(tmp_path.glob("vhms-snapshot-*.npz"))) == 1 and not previous.exists()


def test_a_snapshot_of_the_first_format_still_loads(tmp_path: Path) -> None:
    store = filled()
    save_snapshot(store, tmp_path)
    (data,) = tmp_path.glob("vhms-snapshot-*.npz")
    data.rename(tmp_path / "vhms-snapshot.npz")
    manifest = json.loads((tmp_path / "vhms-snapshot.json").read_text())
    del manifest["data"]
    (tmp_path / "vhms-snapshot.json").write_text(json.dumps(manifest))
    restored = Store()
    assert load_snapshot(restored, tmp_path) is True and restored.series == store.series
