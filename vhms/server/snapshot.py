"""Snapshots of a store: written periodically and on shutdown, read back at start.

A snapshot is two files in its directory, written as ``.tmp`` and renamed, data first:

- ``vhms-snapshot-<created ms>.npz``: numpy arrays (no pickles): per ring its head and its buckets for
  the stored series (``ring<i>.values`` ``[slots, series]`` float64, the finest ring's
  sample times ``ring0.times``, milliseconds from each bucket's start; a snapshot of before
  them has ``ring0.offsets`` instead, in 1/254ths of the step, read as the earliest
  millisecond each stands for), the series keys and string values as one UTF-8 blob plus
  offsets, the string values' series ids and times;
- ``vhms-snapshot.json``: the manifest: format version, creation time, resolutions, series
  count, the name of its ``.npz`` and that file's SHA-256, and (from a service with a
  write-ahead log) ``wal_from``, the first log segment the snapshot does not hold. The
  manifest is the commit point: each snapshot's data goes to a file of its own, so a crash
  before the manifest's rename leaves the previous snapshot whole (the previous data file
  is deleted only after the rename). A manifest without a name (the first format) means
  ``vhms-snapshot.npz``.

Reading checks the manifest, the checksum, the resolutions (they must be the store's) and
every array's shape; any failure raises ``SnapshotError`` saying which, and
:func:`restore_or_empty` then moves the files aside (``*.corrupt-<time>``) and starts
empty instead of crashing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from bookkeeper.ground import fsync_path
from vhms.exceptions import SnapshotError
from vhms.server.finest import FinestRing
from vhms.server.rings import decode_values, encode_values
from vhms.server.store import Store

__all__ = [
    "FORMAT_VERSION",
    "load_snapshot",
    "pack_strings",
    "restore_or_empty",
    "save_snapshot",
    "series_arrays",
    "unpack_strings",
    "wal_from",
]

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
LEGACY_DATA = "vhms-snapshot.npz"
MANIFEST = "vhms-snapshot.json"


def pack_strings(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [s.encode() for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def unpack_strings(blob: np.ndarray, offsets: np.ndarray) -> list[str]:
    data = blob.tobytes()
    bounds = offsets.tolist()
    return [data[bounds[i] : bounds[i + 1]].decode() for i in range(len(bounds) - 1)]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as data:
        while chunk := data.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def save_snapshot(
    store: Store, directory: str | os.PathLike[str], *, on_capture: Callable[[], int] | None = None
) -> Path:
    """Write a snapshot of ``store`` into ``directory``; returns the manifest's path.

    ``on_capture`` is called under the store's lock just before its arrays are copied: the
    service rotates its write-ahead log there and returns the new segment's number, kept
    in the manifest as ``wal_from``: the segments before it hold only batches this
    snapshot has (they are deleted once it is durable, and skipped by a replay over it)."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with store._lock:
        log_from = on_capture() if on_capture is not None else None
        count = store.series
        arrays = series_arrays(store, 0, count)
    created_ms = int(time.time() * 1000)
    while (target / f"vhms-snapshot-{created_ms}.npz").exists():  # never over a committed one
        created_ms += 1
    data = target / f"vhms-snapshot-{created_ms}.npz"
    try:
        data_tmp = data.with_name(data.name + ".tmp")
        with open(data_tmp, "wb") as out:
            np.savez(out, **arrays)  # type: ignore[arg-type]
            out.flush()
            os.fsync(out.fileno())
        os.replace(data_tmp, data)
        manifest = {
            "format_version": FORMAT_VERSION,
            "created_ms": created_ms,
            "resolutions": [str(r) for r in store.resolutions],
            "series": count,
            "data": data.name,
            "sha256": _sha256(data),
        }
        if log_from is not None:
            manifest["wal_from"] = log_from
        manifest_tmp = target / (MANIFEST + ".tmp")
        with open(manifest_tmp, "w") as out:
            json.dump(manifest, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(manifest_tmp, target / MANIFEST)
        fsync_path(target)
        for old in [*target.glob("vhms-snapshot-*.npz"), target / LEGACY_DATA]:
            if old != data and old.exists():
                old.unlink()
    except OSError as exc:
        raise SnapshotError(f"cannot write a snapshot into {target}: {exc}") from None
    log.info("snapshot of %d series written to %s in %.2f s", count, target, time.monotonic() - started)
    return target / MANIFEST


def series_arrays(store: Store, first: int, stop: int) -> dict[str, np.ndarray]:
    """The snapshot's arrays of the series ``[first, stop)`` (all of them: a snapshot; a
    range: a catch-up chunk, :mod:`vhms.server.catchup`). Called under the store's lock."""
    arrays: dict[str, np.ndarray] = {}
    for i, ring in enumerate(store.rings):
        arrays[f"ring{i}.head"] = np.array([ring.head], dtype=np.int64)
        arrays[f"ring{i}.values"] = decode_values(ring.export(first, stop))
        if isinstance(ring, FinestRing):
            arrays[f"ring{i}.times"] = ring.export(first, stop, times=True)
    arrays["keys.blob"], arrays["keys.offsets"] = pack_strings(store.index.keys_of(np.arange(first, stop)))
    string_ids = sorted(i for i in store.strings if first <= i < stop)
    arrays["strings.ids"] = np.array(string_ids, dtype=np.int64)
    arrays["strings.ts"] = np.array([store.strings[i][0] for i in string_ids], dtype=np.int64)
    arrays["strings.blob"], arrays["strings.offsets"] = pack_strings(
        [store.strings[i][1] for i in string_ids]
    )
    return arrays


def _data_file(directory: Path) -> Path | None:
    """The data file the manifest names (``None`` without a readable manifest)."""
    try:
        name = json.loads((directory / MANIFEST).read_text()).get("data", LEGACY_DATA)
    except (OSError, ValueError, AttributeError):
        return None
    return directory / name if isinstance(name, str) and "/" not in name else None


def wal_from(directory: str | os.PathLike[str]) -> int:
    """The first write-ahead log segment the snapshot in ``directory`` does not hold (0 when
    its manifest names none or cannot be read: then every segment replays)."""
    try:
        value = json.loads((Path(directory) / MANIFEST).read_text()).get("wal_from", 0)
    except (OSError, ValueError, AttributeError):
        return 0
    return value if isinstance(value, int) and value >= 0 else 0


def load_snapshot(store: Store, directory: str | os.PathLike[str]) -> bool:
    """Fill an empty ``store`` from the snapshot in ``directory``; ``False`` if there is none,
    ``SnapshotError`` if it is damaged or does not fit the store."""
    source = Path(directory)
    if not (source / MANIFEST).exists():
        return False
    if store.series:
        raise SnapshotError("a snapshot loads into an empty store only")
    try:
        manifest = json.loads((source / MANIFEST).read_text())
        expected = manifest["sha256"]
        version = manifest["format_version"]
        resolutions = manifest["resolutions"]
        count = int(manifest["series"])
        name = manifest.get("data", LEGACY_DATA)
        if not isinstance(name, str) or "/" in name or not name.endswith(".npz"):
            raise ValueError(f"bad data file name {name!r}")
        data = source / name
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SnapshotError(f"{source / MANIFEST} is not a snapshot manifest: {exc}") from None
    if version != FORMAT_VERSION:
        raise SnapshotError(f"snapshot format {version}, this store reads {FORMAT_VERSION}")
    if resolutions != [str(r) for r in store.resolutions]:
        raise SnapshotError(
            f"snapshot resolutions {resolutions} are not the store's {[str(r) for r in store.resolutions]}"
        )
    try:
        actual = _sha256(data)
    except OSError as exc:
        raise SnapshotError(f"cannot read {data}: {exc}") from None
    if actual != expected:
        raise SnapshotError(f"{data} is corrupt: SHA-256 {actual}, the manifest says {expected}")
    try:
        with np.load(data, allow_pickle=False) as arrays:
            keys = unpack_strings(arrays["keys.blob"], arrays["keys.offsets"])
            if len(keys) != count:
                raise SnapshotError(f"snapshot holds {len(keys)} keys, the manifest says {count}")
            with store._lock:
                if store.index.lookup(keys).tolist() != list(range(count)):
                    # written before issue 26 by a peer that spelled one series two ways
                    raise SnapshotError(f"{data} names a series twice (keys spelled two ways)")
                for i, ring in enumerate(store.rings):  # the finest first: coarse rings seal by it
                    ring.head = int(arrays[f"ring{i}.head"][0])
                    ring.grow(count)
                    values = _checked(arrays[f"ring{i}.values"], ring.slots, count)
                    ring.load(encode_values(values))
                    if isinstance(ring, FinestRing):
                        times = _sample_times(arrays, i, ring.step_ms, ring.time_dtype)
                        ring.load(_checked(times, ring.slots, count), times=True)
                texts = unpack_strings(arrays["strings.blob"], arrays["strings.offsets"])
                for series_id, ts, text in zip(
                    arrays["strings.ids"].tolist(), arrays["strings.ts"].tolist(), texts, strict=True
                ):
                    store.strings[series_id] = (ts, text)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise SnapshotError(f"{data} cannot be read: {exc}") from None
    return True


def _sample_times(arrays: Mapping[str, np.ndarray], ring: int, step_ms: int, dtype: type) -> np.ndarray:
    """A finest ring's sample times (ms from the bucket's start) as a snapshot holds them, or
    (a snapshot of before them) from its one-byte offsets, each the earliest millisecond
    its 1/254th of the step stands for."""
    if f"ring{ring}.times" in arrays:
        return np.asarray(arrays[f"ring{ring}.times"]).astype(dtype, copy=False)
    byte = np.asarray(arrays[f"ring{ring}.offsets"]).astype(np.int64)
    return (-(-np.maximum(byte - 1, 0) * step_ms // 254)).astype(dtype)


def _checked(columns: np.ndarray, slots: int, count: int) -> np.ndarray:
    if count == 0 and columns.size == 0:
        return np.zeros((slots, 0), dtype=columns.dtype)  # an empty store's, written as (0, 0) before
    if columns.shape != (slots, count):
        raise SnapshotError(f"snapshot array of shape {columns.shape}, expected {(slots, count)}")
    return columns


def restore_or_empty(store: Store, directory: str | os.PathLike[str]) -> bool:
    """Load the snapshot if it is sound; else report it, move it aside and keep ``store``
    empty. Returns whether a snapshot was loaded."""
    try:
        return load_snapshot(store, directory)
    except SnapshotError as exc:
        log.error("starting without the snapshot in %s: %s", directory, exc)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        data = _data_file(Path(directory))
        for path in (data, Path(directory) / MANIFEST):
            if path is not None and path.exists():
                path.rename(path.with_name(f"{path.name}.corrupt-{stamp}"))
        fresh = Store(store.resolutions, max_series=store.index.max_series)
        store.index, store.rings, store.strings = fresh.index, fresh.rings, fresh.strings
        return False
