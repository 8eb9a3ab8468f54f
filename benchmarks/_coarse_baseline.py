"""``vhms_bench.py --baseline``: fetches from a store's compressed coarse rings timed side by
side with the same buckets in plain coarse rings (the layout before issue 27), in one process.

The plain twin is loaded from a snapshot of the store (the same bits in every ring). For each
case, seven rounds, each: the plain twin, then the store with its cache of decoded blocks
emptied (**cold**: every block decoded), then the store again (**cached**: what a dashboard
asking the same hours again costs). CPU time of the process (``time.process_time``), median
of the rounds: wall clock is the machine's load, not the code's.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np

from vhms import FetchResult
from vhms.server import Store, load_snapshot, save_snapshot
from vhms.server.rings import PlainRing

MINUTE = 60_000
ROUNDS = 7
TARGET = 1.5  # issue 27: a coarse fetch within 1.5x the plain rings' CPU time
CASES: list[tuple[int | str, int]] = [
    (60, 60),
    (300, 4 * 60),
    (900, 24 * 60),
    (3600, 72 * 60),
    ("auto", 24 * 60),
]


def plain_twin(store: Store) -> Store:
    """A store of the same buckets whose coarse rings are plain, through a snapshot."""
    twin = Store(store.resolutions, max_series=store.index.max_series)
    twin.rings[1:] = [PlainRing(r, timed=False) for r in twin.resolutions[1:]]
    with tempfile.TemporaryDirectory(prefix="vhms-bench-") as directory:
        save_snapshot(store, directory)
        load_snapshot(twin, directory)
    return twin


def _cpu_ms(fetch: Callable[[], FetchResult]) -> float:
    started = time.process_time()
    fetch()
    return (time.process_time() - started) * 1000


def _forget_decoded(store: Store) -> None:
    for ring in store.rings[1:]:
        store.decoded.forget(ring.step_ms)


def _case(
    store: Store, twin: Store, selector: str, start: int, end: int, step: int | str
) -> dict[str, object]:
    def fetch(on: Store) -> FetchResult:
        return on.fetch(selector, start, end, resolution=step, sample_times=step == "auto")

    ours, theirs = fetch(store), fetch(twin)
    bits = [np.ascontiguousarray(r.values).view(np.uint64) for r in (ours, theirs)]
    assert ours.keys == theirs.keys and (bits[0] == bits[1]).all(), (selector, step)
    plain, cold, cached = [], [], []
    for _ in range(ROUNDS):
        plain.append(_cpu_ms(lambda: fetch(twin)))
        _forget_decoded(store)
        cold.append(_cpu_ms(lambda: fetch(store)))
        cached.append(_cpu_ms(lambda: fetch(store)))
    p, c, w = (statistics.median(x) for x in (plain, cold, cached))
    what = f"{step} s" if step != "auto" else "every ring, stitched (PromQL's sample read)"
    coarse = step != 60
    return {
        "case": f"fetch CPU, {len(bits[0]):,} series x {bits[0].shape[1]} buckets of {what}: cached / plain",
        "vhms": w / p,
        "unit": "x",
        "target": f"<= {TARGET}" if coarse else "",
        "met": w / p <= TARGET if coarse else None,
        "note": f"plain {p:.2f} ms, cached {w:.2f} ms, cold {c:.2f} ms ({c / p:.1f}x)",
    }


def compare(store: Store, end: int, selectors: list[str], rows: list[dict[str, object]]) -> None:
    """Each selector at each case of ``CASES`` (a ring's step, or ``auto``: PromQL's stitched
    sample read), plain twin against the store, cold and cached; ``rows`` get the ratios."""
    twin = plain_twin(store)
    for selector in selectors:
        rows += [_case(store, twin, selector, end - minutes * MINUTE, end, step) for step, minutes in CASES]
    stats = store.stats
    rows.append(
        {
            "case": "decoded-block cache after the comparison",
            "vhms": store.decoded.bytes / 2**20,
            "unit": "MiB",
            "note": f"budget {store.decoded.budget / 2**20:.0f} MiB; hits {stats['decoded_cache_hits']:,}, "
            f"misses {stats['decoded_cache_misses']:,}, evictions {stats['decoded_cache_evictions']:,}",
        }
    )
