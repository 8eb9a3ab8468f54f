"""The round ledger of an agent with many endpoints: 120 rounds polled, each batch stored in
VHMS and landed, the history ``--behind`` rounds behind (raw_ingest's interval): the cost of
telling the ledger a batch, of its ``/metrics`` gauges and its ``/ledger`` answer, and the
memory it holds (tracemalloc). Prints a table, writes results/ledger_bench.json.

Run: python benchmarks/ledger_bench.py [--endpoints 1000 10000] [--behind 5]
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc
from typing import Any

from _report import report

from collector_agent import RoundLedger

ROUNDS = 120
SAMPLES = 1500
INTERVAL_MS = 60_000


def fill(endpoints: int, behind: int) -> tuple[RoundLedger, float]:
    """The ledger after ``ROUNDS`` rounds, and the CPU seconds that took."""
    keys = [f"10.0.{n // 250}.{n % 250}:7000:0f8fad5b-d9cb-469f-a165-{n:012d}" for n in range(endpoints)]
    ledger = RoundLedger(ROUNDS)
    ledger.declare("vhms", "sink out (channel ch)")
    ledger.declare("history", "sink raw (channel land)")
    started = time.process_time()
    for number in range(ROUNDS):
        round_ms = 1_795_000_000_000 + number * INTERVAL_MS
        for key in keys:
            ledger.expect(round_ms, key, SAMPLES)
            ledger.commit("vhms", round_ms, key, SAMPLES)
            ledger.land(f"raw-{number}.avro", round_ms, key, SAMPLES)
        if number >= behind:
            ledger.files_committed([f"raw-{number - behind}.avro"])
    return ledger, time.process_time() - started


def run(endpoints: int, behind: int) -> dict[str, Any]:
    ledger, recorded = fill(endpoints, behind)
    started = time.process_time()
    gauges = ledger.gauges()
    gauged = time.process_time() - started
    started = time.process_time()
    ledger.view()
    viewed = time.process_time() - started
    del ledger
    tracemalloc.start()  # a second fill, measured apart: tracemalloc slows every allocation
    kept, _ = fill(endpoints, behind)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return {
        "endpoints": endpoints,
        "rounds incomplete": gauges["RoundsIncomplete"],
        "us per batch": round(recorded / (ROUNDS * endpoints) * 1e6, 2),
        "gauges ms": round(gauged * 1000, 2),
        "/ledger ms": round(viewed * 1000, 1),
        "MB held": round(held / 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--behind", type=int, default=5, help="rounds the history lags")
    args = parser.parse_args()
    rows = [run(endpoints, args.behind) for endpoints in args.endpoints]
    print(f"load average {os.getloadavg()[0]:.1f}; {ROUNDS} rounds, history {args.behind} rounds behind")
    report("ledger_bench", rows, list(rows[0]))


if __name__ == "__main__":
    main()
