"""``query_bench.py --peer-cache DIR``: the peers' stores kept between runs, so that a rerun
starts Prometheus and VictoriaMetrics on the data they already hold instead of rebuilding it
(at a million series promtool's blocks take some 10 minutes, VictoriaMetrics's import 4).

An entry is the store of one peer for one size of one data set, and a data set is named by
everything its values depend on: ``DATA_VERSION`` (``_query_data.py``'s seeds and format),
the minutes of history, the end time of the data (the instant every query asks about, and
VHMS is loaded with the same one), and the peers' binaries (their path, size and time):
``DIR/v<version>-m<minutes>-<binaries>/end-<ms>/<series>/{prometheus,victoriametrics}``. An
entry is built under ``*.building`` and renamed when whole, so an interrupted build is never
read; a run starts each peer on a copy of its entry (Prometheus compacts its blocks and
writes its WAL there, VictoriaMetrics merges its parts), the entry itself is never written.

A run's end time is the newest cached one that holds the most of its sizes' entries and is
less than ``MAX_AGE_MS`` old (VictoriaMetrics drops data older than its one month of
retention); older data sets are deleted. Whether a cached store still answers as VHMS does is
checked as every answer is: against the peers' on every point (``values_rel_diff``).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from _query_data import DATA_VERSION

MAX_AGE_MS = 7 * 24 * 3600 * 1000
PEER_BINARIES = ("prometheus", "promtool", "victoria-metrics")


def binaries_tag() -> str:
    """A short digest of the peers' binaries as installed (path, size, modification time)."""
    seen = []
    for name in PEER_BINARIES:
        path = shutil.which(name)
        stat = Path(path).stat() if path else None
        seen.append(f"{name}={path}:{stat.st_size if stat else 0}:{stat.st_mtime_ns if stat else 0}")
    return hashlib.sha256("\n".join(seen).encode()).hexdigest()[:12]


class PeerCache:
    """The cached stores of the data sets of ``minutes`` of history under ``root``."""

    def __init__(self, root: Path, minutes: int) -> None:
        self.root = root.expanduser() / f"v{DATA_VERSION}-m{minutes}-{binaries_tag()}"

    def end(self, sizes: list[int], now_end: int) -> int:
        """The end time of this run's data: the newest cached one less than ``MAX_AGE_MS``
        before ``now_end`` holding the most entries of ``sizes``, else ``now_end`` (older
        data sets are deleted)."""
        best, best_held = now_end, 0
        for path in sorted(self.root.glob("end-*"), reverse=True):
            end = int(path.name.removeprefix("end-"))
            if now_end - end > MAX_AGE_MS:
                shutil.rmtree(path, ignore_errors=True)
                continue
            held = sum(1 for size in sizes for peer in path.glob(f"{size}/*") if "." not in peer.name)
            if held > best_held:
                best, best_held = end, held
        return best

    def entry(self, series: int, end: int, peer: str) -> Path:
        """Where one peer's store of one size of the data set ending at ``end`` is kept
        (whole once it exists)."""
        return self.root / f"end-{end}" / str(series) / peer


def keep(built: Path, entry: Path) -> None:
    """Copy a store just built into the cache as ``entry`` (under ``*.building`` until whole)."""
    building = entry.with_name(f"{entry.name}.building")
    shutil.rmtree(building, ignore_errors=True)
    shutil.copytree(built, building)
    building.rename(entry)


def restore(entry: Path, work: Path) -> Path:
    """A copy of a cached store in ``work`` for a peer to start on (and write to)."""
    target = work / entry.name
    shutil.copytree(entry, target)
    return target
