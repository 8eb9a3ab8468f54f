"""Small PromQL queries over HTTP, one at a time: the official compliance tester's queries
(``promql-test-queries.yml`` of github.com/prometheus/compliance: the copy
benchmarks/promql_compliance.py cached from its snapshot, or ``--queries FILE``) expanded as
the tester expands them, sent as the tester sends them (``query_range``, 10 minutes ending 12
minutes before the data's end, a 10 s step) to a real Prometheus and to Artimon's query API
(uvicorn), both holding the same few dozen demo-like series (the names and labels of
prometheus_demo_service, scraped every 5 s from three instances for 100 minutes). Each round
sends every query to both sides in turn (which side goes first alternates); a query's time is
its median over the rounds, the body read inside the timed interval. Printed: the median and
p95 per side with their ratio, the load average, and the 20 slowest queries of Artimon's beside
Prometheus's.

    PYTHONPATH=. python benchmarks/promql_small_bench.py [--rounds 3] [--queries FILE]
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import statistics
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import yaml
from _report import report

from artimon.servers import PrometheusServer, create_blocks
from bookkeeper.ground import BackgroundServer
from query_dsl import Limits, create_app
from query_dsl.promql.dataset import Series, write_openmetrics
from query_dsl.testing import load_store
from vhms import LocalClient
from vhms.server import Store

# where benchmarks/promql_compliance.py leaves the tester's query file (named by its commit)
CACHED_QUERIES = Path.home() / ".cache" / "artimon" / "go" / "bin"
INTERVAL_S = 5
MINUTES = 100
INSTANCES = [f"demo.promlabs.com:{port}" for port in (10000, 10001, 10002)]
BUCKETS = ("0.0001", "0.001", "0.01", "0.05", "0.1", "0.5", "+Inf")

# the tester's variant values (promql/testcases/expand.go)
VARIANTS: dict[str, list[str]] = {
    "range": ["1s", "15s", "1m", "5m", "15m", "1h"],
    "offset": ["1m", "5m", "10m"],
    "simpleAggrOp": ["sum", "avg", "max", "min", "count", "stddev", "stdvar"],
    "simpleTimeAggrOp": ["sum", "avg", "max", "min", "count", "stddev", "stdvar", "absent", "last"],
    "topBottomOp": ["topk", "bottomk"],
    "quantile": ["-0.5", "0.1", "0.5", "0.75", "0.95", "0.90", "0.99", "1", "1.5"],
    "arithBinOp": ["+", "-", "*", "/", "%", "^"],
    "compBinOp": ["==", "!=", "<", ">", "<=", ">="],
    "binOp": ["+", "-", "*", "/", "%", "^", "==", "!=", "<", ">", "<=", ">="],
    "simpleMathFunc": ["abs", "ceil", "floor", "exp", "sqrt", "ln", "log2", "log10", "round"],
    "extrapolatedRateFunc": ["delta", "rate", "increase"],
    "clampFunc": ["clamp_min", "clamp_max"],
    "instantRateFunc": ["idelta", "irate"],
    "dateFunc": ["day_of_month", "day_of_week", "days_in_month", "hour", "minute", "month", "year"],
    "smoothingFactor": ["0.1", "0.5", "0.8"],
    "trendFactor": ["0.1", "0.5", "0.8"],
}
_ARGUMENT = re.compile(r"\{\{\s*\.(\w+)\s*\}\}")


def expand(query: str, names: list[str]) -> list[str]:
    """Every variant of ``query``, the first name varying slowest (the tester's order)."""
    combos: list[dict[str, str]] = [{}]
    for name in names:
        combos = [{**combo, name: value} for combo in combos for value in VARIANTS[name]]
    return [_ARGUMENT.sub(lambda m, c=combo: c[m.group(1)], query) for combo in combos]


def cached_queries() -> Path | None:
    """The newest query file promql_compliance.py cached, if it ran on this machine."""
    found = sorted(CACHED_QUERIES.glob("promql-test-queries-*.yml"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def load_queries(path: Path) -> list[str]:
    """The expanded expressions of a tester's query file, in its order."""
    cases = yaml.safe_load(path.read_text())["test_cases"]
    return [text for case in cases for text in expand(case["query"], case.get("variant_args", []))]


def demo_series(end_s: int, seed: int = 27) -> list[Series]:
    """prometheus_demo_service's series for ``MINUTES`` ending at ``end_s``, job ``demo``."""
    rng = np.random.default_rng(seed)
    points = MINUTES * 60 // INTERVAL_S
    out: list[Series] = []
    for index, instance in enumerate(INSTANCES):
        times = (end_s - INTERVAL_S * np.arange(points)[::-1]) * 1000 + 137 * index
        stamps = times / 1000

        def add(
            name: str, values: np.ndarray, _times: np.ndarray = times, _at: str = instance, **labels: str
        ) -> None:
            out.append(Series(name, {"instance": _at, "job": "demo", **labels}, _times, values))

        for mode, share in (("idle", 0.7), ("system", 0.1), ("user", 0.2)):
            add("demo_cpu_usage_seconds_total", np.cumsum(rng.uniform(0, 2 * share, points) * 4), mode=mode)
        for kind, size in (("buffers", 2e8), ("cached", 6e8), ("free", 2e9), ("used", 5e9)):
            add(
                "demo_memory_usage_bytes",
                np.round(size * (1 + 0.1 * np.sin(stamps / 300 + index))),
                type=kind,
            )
        add("demo_disk_usage_bytes", np.round(4e10 + np.cumsum(rng.integers(0, 4096, points))))
        add("demo_disk_total_bytes", np.full(points, 1e11))
        add("demo_num_cpus", np.full(points, 4.0))
        add("demo_batch_last_success_timestamp_seconds", np.floor(stamps / 600) * 600)
        present = (np.arange(points) // 24) % 2 == 0
        add("demo_intermittent_metric", np.full(int(present.sum()), 1.0), times[present])
        for method, path in (("GET", "/api/foo"), ("POST", "/api/bar")):
            labels = {"method": method, "path": path, "status": "200"}
            per_bucket = rng.integers(0, 6, (points, len(BUCKETS)))
            cumulative = np.cumsum(np.cumsum(per_bucket, axis=1), axis=0).astype(np.float64)
            for column, le in enumerate(BUCKETS):
                add("demo_api_request_duration_seconds_bucket", cumulative[:, column], le=le, **labels)
            add("demo_api_request_duration_seconds_count", cumulative[:, -1], **labels)
            add("demo_api_request_duration_seconds_sum", np.round(cumulative[:, -1] * 0.02, 3), **labels)
    return out


class Side:
    """One query API on a keep-alive connection; ``ask`` times a request and its body."""

    def __init__(self, base: str, path: str) -> None:
        parts = urllib.parse.urlsplit(base)
        self.connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
        self.path = path

    def ask(self, params: dict[str, str]) -> tuple[float, int]:
        started = time.perf_counter()
        self.connection.request("GET", f"{self.path}?{urllib.parse.urlencode(params)}")
        response = self.connection.getresponse()
        response.read()
        return time.perf_counter() - started, response.status


@contextmanager
def servers(home: Path, series: list[Series]) -> Iterator[tuple[Side, Side]]:
    """A real Prometheus and Artimon's query API, both loaded with ``series``."""
    prometheus = PrometheusServer(home / "prometheus")
    create_blocks(write_openmetrics(series, home / "data.om"), prometheus.tsdb_dir)
    store = Store(f"{INTERVAL_S}s:{MINUTES * 60 // INTERVAL_S + 240}")
    load_store(series, store)
    artimon = BackgroundServer(
        create_app(LocalClient(store), limits=Limits(timeout_s=30)), name="promql-small"
    )
    with prometheus:
        artimon.start()
        try:
            yield (
                Side(prometheus.url, "/api/v1/query_range"),
                Side(artimon.url, "/prometheus/api/v1/query_range"),
            )
        finally:
            artimon.stop()


def _p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def run(queries: list[str], rounds: int) -> None:
    end_s = int(time.time()) // 60 * 60 - 60
    series = demo_series(end_s)
    query_end = end_s - 12 * 60
    with tempfile.TemporaryDirectory(prefix="promql-small-") as tmp, servers(Path(tmp), series) as sides:
        times: dict[str, list[list[float]]] = {q: [[], []] for q in queries}
        refused = [0, 0]
        for round_index in range(rounds + 1):  # round 0 settles both sides and is not counted
            for number, query in enumerate(queries):
                params = {"query": query, "start": str(query_end - 600), "end": str(query_end), "step": "10"}
                order = (0, 1) if (number + round_index) % 2 == 0 else (1, 0)
                for side in order:
                    elapsed, status = sides[side].ask(params)
                    if round_index:
                        times[query][side].append(elapsed * 1000)
                    elif status != 200:
                        refused[side] += 1
        load = os.getloadavg()
    per_query = {q: (statistics.median(t[0]), statistics.median(t[1])) for q, t in times.items()}
    prom = [p for p, _ in per_query.values()]
    art = [a for _, a in per_query.values()]
    print(f"{len(queries)} queries, {len(series)} series, {rounds} rounds; load average {load[0]:.2f}")
    print(f"refused (not 200): prometheus {refused[0]}, artimon {refused[1]}")
    for what, pick in (("median", statistics.median), ("p95", _p95)):
        theirs, ours = pick(prom), pick(art)
        print(f"{what:7s} prometheus {theirs:7.2f} ms  artimon {ours:7.2f} ms  ratio {ours / theirs:.2f}")
    print(f"total   prometheus {sum(prom):7.0f} ms  artimon {sum(art):7.0f} ms\n")
    slowest = sorted(per_query.items(), key=lambda item: -item[1][1])[:20]
    rows = [
        {"query": q[:90], "artimon ms": round(a, 2), "prometheus ms": round(p, 2), "ratio": round(a / p, 1)}
        for q, (p, a) in slowest
    ]
    report("promql_small_bench", rows, ["query", "artimon ms", "prometheus ms", "ratio"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--queries",
        type=Path,
        default=cached_queries(),
        help=f"a tester's promql-test-queries.yml (default: the newest one cached in {CACHED_QUERIES})",
    )
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.queries is None:
        parser.error(
            f"no query file: none cached in {CACHED_QUERIES}; run benchmarks/promql_compliance.py "
            "once with --snapshots, or give --queries FILE from a snapshot of "
            "github.com/prometheus/compliance"
        )
    run(load_queries(args.queries), args.rounds)


if __name__ == "__main__":
    main()
