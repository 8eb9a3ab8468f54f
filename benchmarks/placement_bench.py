"""How evenly VHMS's consistent-hash ring spreads series over shards (the figures behind
docs/operations.md §8.5): series keys of 1,000 endpoints of 1,500 variables placed by
``vhms.placement.HashRing`` as the sinks place them, for several shard counts and virtual
nodes; the largest and the smallest shard against the mean.

Run: python benchmarks/placement_bench.py [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
from _report import report

from bookkeeper.ground import key_hashes
from vhms.placement import HashRing

CASES = [(100, 64), (128, 64), (100, 256), (100, 1024)]  # (shards, virtual nodes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100 endpoints instead of 1,000")
    args = parser.parse_args()
    endpoints = 100 if args.quick else 1000
    keys = [f"app.var{v}{{context=app,dc=jb,host=h{h:05d}}}" for h in range(endpoints) for v in range(1500)]
    hashes = key_hashes(keys)
    rows = []
    for shards, virtual_nodes in CASES:
        ring = HashRing([f"s{i}" for i in range(1, shards + 1)], virtual_nodes)
        _, counts = np.unique(ring.shards_of(hashes), return_counts=True)
        mean = len(keys) / shards
        rows.append(
            {
                "series": len(keys),
                "shards": shards,
                "virtual nodes": virtual_nodes,
                "largest / mean": round(float(counts.max()) / mean, 3),
                "smallest / mean": round(float(counts.min()) / mean, 3) if len(counts) == shards else 0.0,
                "std / mean": round(float(counts.std()) / mean, 3),
            }
        )
    report("placement_bench", rows, list(rows[0]))


if __name__ == "__main__":
    main()
