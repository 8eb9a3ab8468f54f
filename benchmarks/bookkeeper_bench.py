"""Bookkeeper hot paths against prometheus_client, and a 10,000-variable snapshot over a
real socket. Prints a table, writes results/bookkeeper_bench.json.

Targets (issue 2): cached handle no slower than prometheus_client's cached child ``inc()``;
mapping form no slower than its ``labels(...).inc()``; a 10,000-variable snapshot read end
to end in under 20 ms.

Run: python benchmarks/bookkeeper_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit

from _report import report
from prometheus_client import CollectorRegistry, Counter

from bookkeeper import Bookkeeper, EndpointClient


def per_op_ns(stmt, number: int, repeat: int) -> float:
    """Best of ``repeat`` runs of ``number`` calls, in ns per call (best = least noise)."""
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number * 1e9


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer iterations (CI smoke run)")
    args = parser.parse_args()
    number, repeat, reads = (20_000, 3, 10) if args.quick else (200_000, 7, 50)

    bk = Bookkeeper("bench", environ={})
    labels = {"method": "GET", "status": "200"}
    handle = bk.integer("http.requests", labels)
    counter = Counter("http_requests", "requests", ["method", "status"], registry=CollectorRegistry())
    child = counter.labels(method="GET", status="200")

    ours_handle = per_op_ns(lambda: handle.add(1), number, repeat)
    theirs_child = per_op_ns(lambda: child.inc(), number, repeat)
    ours_mapping = per_op_ns(lambda: bk.add_to_integer_var("http.requests", labels, 1), number, repeat)
    ours_kwargs = per_op_ns(
        lambda: bk.integer("http.requests", method="GET", status="200").add(1), number, repeat
    )
    theirs_labels = per_op_ns(lambda: counter.labels(method="GET", status="200").inc(), number, repeat)

    big = Bookkeeper("bench-10k", environ={})
    for i in range(10_000):
        big.integer("app.counter", shard=str(i % 100), item=str(i)).set(i)
    server = big.serve(register=False)
    timings = []
    with EndpointClient(server.host, server.port) as client:
        client.snapshot()  # warm the connection
        for _ in range(reads):
            started = time.perf_counter()
            batch = client.snapshot()
            timings.append((time.perf_counter() - started) * 1000)
    assert len(batch) == 10_000
    server.stop()
    snapshot_only = min(timeit.repeat(big.snapshot, number=1, repeat=reads)) * 1000

    rows = [
        {
            "case": "increment, cached handle",
            "artimon": ours_handle,
            "prometheus_client": theirs_child,
            "unit": "ns/op",
            "ratio": ours_handle / theirs_child,
            "target": "ratio <= 1",
        },
        {
            "case": "increment, mapping API",
            "artimon": ours_mapping,
            "prometheus_client": theirs_labels,
            "unit": "ns/op",
            "ratio": ours_mapping / theirs_labels,
            "target": "ratio <= 1",
        },
        {
            "case": "increment, kwargs handle lookup",
            "artimon": ours_kwargs,
            "prometheus_client": theirs_labels,
            "unit": "ns/op",
            "ratio": ours_kwargs / theirs_labels,
            "target": "ratio <= 1",
        },
        {
            "case": "10k-variable snapshot, socket read+decode (median)",
            "artimon": statistics.median(timings),
            "unit": "ms",
            "target": "< 20 ms",
        },
        {
            "case": "10k-variable snapshot, socket read+decode (best)",
            "artimon": min(timings),
            "unit": "ms",
            "target": "< 20 ms",
        },
        {
            "case": "10k-variable snapshot, columns only (best)",
            "artimon": snapshot_only,
            "unit": "ms",
        },
    ]
    report(
        "bookkeeper_bench",
        rows,
        ["case", "artimon", "prometheus_client", "unit", "ratio", "target"],
    )


if __name__ == "__main__":
    main()
