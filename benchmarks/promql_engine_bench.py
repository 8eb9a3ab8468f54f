"""PromQL on the engine, in process: instant and range queries over N series (100,000 by
default) of 60 samples, 15 s apart, in one VHMS store; the best of three runs of each, the
answer written as Prometheus's JSON. The comparison with Prometheus and VictoriaMetrics on
the same dataset is benchmarks/query_bench.py's.

    PYTHONPATH=. python benchmarks/promql_engine_bench.py [--series 100000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from query_dsl.promql import instant_query, range_query
from vhms import LocalClient
from vhms.server import Store

QUERIES = [
    "req_total",
    "sum(req_total)",
    "sum by (job) (req_total)",
    "sum by (job) (rate(req_total[5m]))",
    "max(req_total)",
    "topk(5, req_total)",
    "count(req_total > 10)",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=100_000)
    args = parser.parse_args()
    count = args.series
    now = int(time.time()) // 60 * 60
    store = Store("15s:480", max_series=2 * count, max_series_per_query=2 * count)
    keys = [f"req_total{{job=j{i % 10},instance=i{i % 1000},shard=s{i}}}" for i in range(count)]
    for k in range(60):
        store.ingest(
            keys,
            np.full(count, float(k)) + np.arange(count) % 7,
            np.full(count, (now - 15 * (59 - k)) * 1000),
        )
    source = LocalClient(store)
    instant_query(source, "up", now)  # the parser's tables, built once per process
    print(f"{count} series, 60 samples each; best of 3 (ms)")
    print(f"{'query':40s} {'instant':>9s} {'range 10m/1m':>13s}")
    for query in QUERIES:
        timings = []
        for run in (
            lambda q=query: instant_query(source, q, now).to_prometheus_json(),
            lambda q=query: range_query(source, q, now - 600, now, 60).to_prometheus_json(),
        ):
            best = float("inf")
            for _ in range(3):
                started = time.perf_counter()
                run()
                best = min(best, time.perf_counter() - started)
            timings.append(best * 1000)
        print(f"{query:40s} {timings[0]:9.1f} {timings[1]:13.1f}")


if __name__ == "__main__":
    main()
