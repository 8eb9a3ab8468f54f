"""``vhms_bench.py --first-round-baseline DIR``: the first round of new series (a restart, a
burst of new hosts) timed side by side with the same round in another checkout of the code
(``DIR``, e.g. ``git worktree add /tmp/base main``), in one sitting.

Each run is a child process of its own (this file, with ``PYTHONPATH`` set to the checkout),
the two checkouts taking turns: the benchmark's keys and batches of 10K, a fresh store, the
round through ``Store.ingest_columns`` (``store``), or the index's lookups alone (``index``:
its RSS per series then is the index's, the rings untouched). CPU time of the process
(``time.process_time``) is the measure; wall clock is the machine's load, reported beside it
with the load average.

Run alone: python benchmarks/_first_round.py COUNT store|index (prints one JSON line)
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from vhms_bench import BATCH, MINUTE, _with_samples, make_keys, rss_bytes

from bookkeeper.wire import IngestColumns
from vhms.server import Store

RUNS = 3  # per checkout and mode, taking turns
_HERE = Path(__file__).resolve()


def first_round(count: int, mode: str) -> dict[str, float]:
    """One first round of ``count`` new series in this process: seconds of wall and CPU,
    and the RSS it added per series."""
    keys = make_keys(count)
    values = np.random.default_rng(1).random(count) * 1000
    start = int(time.time() * 1000) // MINUTE * MINUTE - 10 * MINUTE
    sent = [
        _with_samples(
            IngestColumns.from_keys(keys[first : first + BATCH], values[first : first + BATCH], np.zeros(0)),
            values[first : first + BATCH],
            start,
        )
        for first in range(0, count, BATCH)
    ]
    del keys
    Store(max_series=1).ingest(["warm.up{a=b}"], values[:1], np.full(1, start))  # first calls
    gc.collect()
    before = rss_bytes()
    store = Store(max_series=count)
    started, cpu = time.perf_counter(), time.process_time()
    for batch in sent:
        if mode == "index":
            store.index.lookup_columns(batch.names, batch.label_sets, batch.name_ids, batch.set_ids)
        else:
            store.ingest_columns(batch)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    gc.collect()
    return {"wall": wall, "cpu": cpu, "rss_per_series": (rss_bytes() - before) / count}


def _child(checkout: Path, count: int, mode: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    done = subprocess.run(
        [sys.executable, str(_HERE), str(count), mode], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(count: int, baseline: Path, rows: list[dict[str, object]], runs: int = RUNS) -> None:
    """The first round of ``count`` series here and in ``baseline``, ``runs`` times each by
    turns, per mode; rows of medians (and ranges) appended to ``rows``."""
    load = os.getloadavg()[0]
    checkouts = {"before": baseline.resolve(), "after": _HERE.parents[1]}
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for run in range(runs):
        for mode in ("store", "index"):
            order = ("before", "after") if run % 2 else ("after", "before")
            for which in order:
                results.setdefault((which, mode), []).append(_child(checkouts[which], count, mode))
                print(
                    f"first round, {which}, {mode}: {results[which, mode][-1]}", file=sys.stderr, flush=True
                )
    loads = f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    for mode, what in (("store", "through the store"), ("index", "the index alone")):
        for clock in ("cpu", "wall"):
            rates = {w: [count / r[clock] for r in results[w, mode]] for w in ("before", "after")}
            rows.append(
                {
                    "case": f"first round, {count:,} new series, {what}, {clock.upper()}: after / before",
                    "vhms": statistics.median(rates["after"]) / statistics.median(rates["before"]),
                    "unit": "x",
                    "note": f"series/s, median (range) of {runs}: before {_spread(rates['before'])}, "
                    f"after {_spread(rates['after'])}; {loads}",
                }
            )
    memory = {
        w: statistics.median(r["rss_per_series"] for r in results[w, "index"]) for w in ("before", "after")
    }
    rows.append(
        {
            "case": f"first round, {count:,} new series: the index's RSS per series, before / after",
            "vhms": memory["after"],
            "unit": "bytes",
            "note": f"before {memory['before']:.0f} B",
        }
    )


def _spread(rates: list[float]) -> str:
    return f"{statistics.median(rates) / 1e6:.2f}M ({min(rates) / 1e6:.2f}-{max(rates) / 1e6:.2f}M)"


if __name__ == "__main__":
    print(json.dumps(first_round(int(sys.argv[1]), sys.argv[2])))
