"""VHMS: the index's state per series (tracemalloc: its Python objects and numpy arrays; the
rings live in anonymous memory of their own and are not counted), once the batches that
brought the series are gone: what issue 26 measured before and after the key text left the
store (docs/vhms.md).

Run: python benchmarks/index_state_bench.py [series]
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc

import numpy as np
from vhms_bench import BATCH, MINUTE, make_keys

from bookkeeper.wire import IngestColumns
from vhms.server import Store


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    now = int(time.time() * 1000) // MINUTE * MINUTE
    Store(max_series=1).ingest(["warm.up{a=b}"], np.ones(1), np.full(1, now))  # first calls
    gc.collect()
    tracemalloc.start()
    store = Store(max_series=count)
    keys = make_keys(count)
    for round_number in range(3):
        for first in range(0, count, BATCH):
            part = keys[first : first + BATCH]
            store.ingest_columns(
                IngestColumns.from_keys(
                    part,
                    np.ones(len(part)) + round_number,
                    np.full(len(part), now - (3 - round_number) * MINUTE),
                )
            )
    del keys
    gc.collect()
    current, _ = tracemalloc.get_traced_memory()
    print(f"{count:,} series: index state {current / count:,.0f} B per series (tracemalloc)")


if __name__ == "__main__":
    main()
