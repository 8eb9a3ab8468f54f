"""The small PromQL queries of benchmarks/promql_small_bench.py (the compliance tester's 539,
over the same demo series, ``query_range`` of 10 minutes at a 10 s step) evaluated in
process, without HTTP: each query's CPU time (its thread's: the evaluation, the budget, the
answer's JSON text), the best of ``--rounds`` rounds of all the queries in turn (so a query
runs cold, after the others, as over HTTP); printed: the median, p95 and total, and the
number over 2 ms. ``--baseline DIR`` measures another checkout the same way (each side in a
process of its own with its code first on ``sys.path``, sides alternating ``--pairs`` times),
so that before and after come from one run.

    PYTHONPATH=. python benchmarks/promql_small_cpu.py [--rounds 5] [--pairs 2] [--baseline DIR] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from promql_small_bench import INTERVAL_S, MINUTES, cached_queries, demo_series, load_queries

END_S = 1_795_000_000  # the data's end: fixed, so that every side reads the same samples


def measure(queries: list[str], rounds: int) -> dict[str, float]:
    """Each query's best CPU time (ms) over ``rounds``, in this process's code."""
    from query_dsl import Limits, QueryError
    from query_dsl.budget import QueryBudget
    from query_dsl.promql import range_query
    from query_dsl.testing import load_store
    from vhms import LocalClient
    from vhms.server import Store

    store = Store(f"{INTERVAL_S}s:{MINUTES * 60 // INTERVAL_S + 240}")
    load_store(demo_series(END_S), store)
    source, limits, end = LocalClient(store), Limits(timeout_s=30), END_S - 12 * 60
    best = dict.fromkeys(queries, float("inf"))
    for round_index in range(rounds + 1):  # round 0 settles (imports, caches) and is not counted
        for query in queries:
            started = time.thread_time()
            try:
                budget = QueryBudget(limits.max_bytes)
                result = range_query(source, query, end - 600, end, 10, limits=limits, budget=budget)
                budget.need(result.answer_bytes(), "the answer")
                bytes(result.to_prometheus_body())
            except QueryError:  # refused (5 of the 539: a range vector asked as a range query)
                pass
            if round_index:
                best[query] = min(best[query], (time.thread_time() - started) * 1000)
    return best


def _side(checkout: Path, queries_file: Path, rounds: int) -> dict[str, float]:
    """:func:`measure` in a process with ``checkout``'s code first on ``sys.path``."""
    child = subprocess.run(
        [sys.executable, __file__, "--child", f"--queries={queries_file}", f"--rounds={rounds}"],
        env={**os.environ, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, float] = json.loads(child.stdout)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=Path, default=cached_queries())
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument(
        "--baseline", type=Path, default=None, help="another checkout, measured beside this one"
    )
    parser.add_argument("--quick", action="store_true", help="one round, one pair")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.rounds = args.pairs = 1
    if args.queries is None:
        parser.error("no query file: run benchmarks/promql_compliance.py once, or give --queries FILE")
    if args.child:
        print(json.dumps(measure(load_queries(args.queries), args.rounds)))
        return
    sides = {
        "artimon": Path(__file__).resolve().parents[1],
        **({"before": args.baseline} if args.baseline else {}),
    }
    for pair in range(args.pairs):
        for name, checkout in sides.items():
            times = list(_side(checkout, args.queries, args.rounds).values())
            load = os.getloadavg()[0]
            print(
                f"pair {pair + 1} {name:8s} median {statistics.median(times):.3f} ms  "
                f"p95 {float(np.percentile(times, 95)):.3f} ms  total {sum(times):.1f} ms  "
                f"over 2 ms {sum(t > 2 for t in times)}  (load average {load:.2f})"
            )


if __name__ == "__main__":
    main()
