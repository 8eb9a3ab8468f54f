"""Small PromQL queries over HTTP, one at a time: the official compliance tester's queries
(``promql-test-queries.yml`` of github.com/prometheus/compliance: the copy
benchmarks/promql_compliance.py cached from its snapshot, or ``--queries FILE``) expanded as
the tester expands them, sent as the tester sends them (``query_range``, 10 minutes ending 12
minutes before the data's end, a 10 s step) to a real Prometheus and to Artimon's query API
(uvicorn, in a process of its own as Prometheus is: this script's ``--serve``), both holding
the same few dozen demo-like series (the names and labels of prometheus_demo_service, scraped
every 5 s from three instances for 100 minutes). ``--baseline DIR`` adds a side, ``before``:
the query API of another checkout (main before a change) over the same series. Each Artimon
side runs on its checkout's own interpreter (``DIR/.venv/bin/python`` when there is one: its
dependencies as installed with it, uvloop or not), else on this one. Each round sends every
query to every side in turn (their order goes through all its permutations, so that no side
always follows the same other); a query's time is its median over the rounds, the body read
inside the timed interval. Printed: the median and p95 per side with their ratio to
Prometheus's, the load average, and the 20 slowest queries of Artimon's beside the other
sides' (every query's times: results/promql_small_queries.json). ``--floor N`` times
instead what a request costs at least: ``GET /api/v1/status/buildinfo`` and the range query
``1`` (61 steps), N times per side, the sides in turn (median and p90, µs).

Every side is asked alike: one ``http.client`` connection each, kept alive; the same request
headers (``Host``, ``Accept-Encoding: identity``: no side compresses); the same parameters,
as a query string. The sides answer with the same headers (``Date``, ``Content-Type``,
``Content-Length``).

    PYTHONPATH=. python benchmarks/promql_small_bench.py [--rounds 3] [--queries FILE] [--baseline DIR]
        [--floor N]
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import yaml
from _report import RESULTS, report

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
    """One Prometheus API (under ``root``) on a keep-alive connection; ``ask`` times a request
    and its body."""

    def __init__(self, base: str, root: str) -> None:
        parts = urllib.parse.urlsplit(base)
        self.connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
        self.root = root

    def ask(self, params: dict[str, str], route: str = "/api/v1/query_range") -> tuple[float, int]:
        target = f"{self.root}{route}?{urllib.parse.urlencode(params)}" if params else self.root + route
        started = time.perf_counter()
        self.connection.request("GET", target)
        response = self.connection.getresponse()
        response.read()
        return time.perf_counter() - started, response.status


def serve(port: int, end_s: int) -> None:
    """The Artimon side (``--serve``, in a child process): the demo series ending at ``end_s``
    in VHMS, the query API over them on ``port``, until terminated."""
    store = Store(f"{INTERVAL_S}s:{MINUTES * 60 // INTERVAL_S + 240}")
    load_store(demo_series(end_s), store)
    api = create_app(LocalClient(store), limits=Limits(timeout_s=30))
    BackgroundServer(api, "127.0.0.1", port, name="promql-small").start()
    threading.Event().wait()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_artimon(checkout: Path, end_s: int) -> tuple[subprocess.Popen[bytes], str]:
    """This script's ``--serve`` with ``checkout``'s code first on ``sys.path``, once it answers."""
    port = _free_port()
    own = checkout / ".venv" / "bin" / "python"
    child = subprocess.Popen(
        [str(own) if own.exists() else sys.executable, __file__, f"--serve={port}", f"--end={end_s}"],
        env={**os.environ, "PYTHONPATH": str(checkout)},
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and child.poll() is None:
        try:
            probe = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            probe.request("GET", "/prometheus/api/v1/labels")
            if probe.getresponse().status == 200:
                return child, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    child.kill()
    raise RuntimeError(f"the query API of {checkout} did not answer on port {port}")


@contextmanager
def servers(home: Path, series: list[Series], end_s: int, baseline: Path | None) -> Iterator[dict[str, Side]]:
    """A real Prometheus and Artimon's query API (and ``baseline``'s), all holding ``series``."""
    prometheus = PrometheusServer(home / "prometheus")
    create_blocks(write_openmetrics(series, home / "data.om"), prometheus.tsdb_dir)
    checkouts = {"artimon": Path(__file__).resolve().parents[1], **({"before": baseline} if baseline else {})}
    children: list[subprocess.Popen[bytes]] = []
    with prometheus:
        try:
            sides = {"prometheus": Side(prometheus.url, "")}
            for name, checkout in checkouts.items():
                child, url = start_artimon(checkout, end_s)
                children.append(child)
                sides[name] = Side(url, "/prometheus")
            yield sides
        finally:
            for child in children:
                child.terminate()
                child.wait(timeout=30)


def _p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def _time(
    sides: dict[str, Side], queries: list[str], rounds: int, query_end: int
) -> dict[str, dict[str, float]]:
    """Each query's median time (ms) per side over ``rounds``, after a round that settles
    every side and counts what they refuse."""
    names = list(sides)
    # every order of the sides in turn, not only rotations: with three sides a rotation keeps
    # who follows whom (Artimon came right after Prometheus two rounds in three, ``before``
    # never), and a side meets what the one before it left running (Prometheus's 1-hour
    # quantile_over_time takes 60-180 ms here)
    orders = list(itertools.permutations(names))
    times: dict[str, dict[str, list[float]]] = {q: {name: [] for name in names} for q in queries}
    refused = dict.fromkeys(names, 0)
    for round_index in range(rounds + 1):  # round 0 settles the sides and is not counted
        for number, query in enumerate(queries):
            params = {"query": query, "start": str(query_end - 600), "end": str(query_end), "step": "10"}
            for name in orders[(number + round_index) % len(orders)]:
                elapsed, status = sides[name].ask(params)
                if round_index:
                    times[query][name].append(elapsed * 1000)
                elif status != 200:
                    refused[name] += 1
    print("refused (not 200): " + ", ".join(f"{name} {count}" for name, count in refused.items()))
    return {q: {name: statistics.median(t) for name, t in by_side.items()} for q, by_side in times.items()}


def _floor(sides: dict[str, Side], requests: int, query_end: int) -> None:
    """What a request costs at least on each side: ``requests`` times a trivial request and
    the range query ``1``, the sides in turn (after 50 that settle them)."""
    range_params = {"query": "1", "start": str(query_end - 600), "end": str(query_end), "step": "10"}
    cases = {
        "buildinfo": ("/api/v1/status/buildinfo", {}),
        "query 1, 61 steps": ("/api/v1/query_range", range_params),
    }
    rows = []
    for case, (route, params) in cases.items():
        times: dict[str, list[float]] = {name: [] for name in sides}
        for number in range(requests + 50):
            for name, side in sides.items():
                elapsed, status = side.ask(params, route)
                if status != 200:
                    raise RuntimeError(f"{name} answered {case} with {status}")
                if number >= 50:
                    times[name].append(elapsed * 1e6)
        for name, values in times.items():
            rows.append(
                {
                    "request": case,
                    "side": name,
                    "median µs": round(statistics.median(values)),
                    "p90 µs": round(float(np.percentile(values, 90))),
                }
            )
    print(f"{requests} requests of each per side; load average {os.getloadavg()[0]:.2f}")
    report("promql_small_floor", rows, ["request", "side", "median µs", "p90 µs"])


def run(queries: list[str], rounds: int, baseline: Path | None, floor: int | None) -> None:
    end_s = int(time.time()) // 60 * 60 - 60
    series = demo_series(end_s)
    with (
        tempfile.TemporaryDirectory(prefix="promql-small-") as tmp,
        servers(Path(tmp), series, end_s, baseline) as sides,
    ):
        if floor is not None:
            _floor(sides, floor, end_s - 12 * 60)
            return
        per_query = _time(sides, queries, rounds, end_s - 12 * 60)
        load = os.getloadavg()
    names = list(sides)
    print(f"{len(queries)} queries, {len(series)} series, {rounds} rounds; load average {load[0]:.2f}")
    for what, pick in (("median", statistics.median), ("p95", _p95), ("total", sum)):
        figures = {name: pick([times[name] for times in per_query.values()]) for name in names}
        theirs = figures["prometheus"]
        print(
            f"{what:7s} "
            + "  ".join(f"{name} {figures[name]:8.2f} ms ({figures[name] / theirs:.2f})" for name in names)
        )
    slowest = sorted(per_query.items(), key=lambda item: -item[1]["artimon"])[:20]
    rows = [
        {
            "query": q[:90],
            **{f"{name} ms": round(times[name], 2) for name in names},
            "ratio": round(times["artimon"] / times["prometheus"], 1),
        }
        for q, times in slowest
    ]
    report("promql_small_bench", rows, ["query", *(f"{name} ms" for name in names), "ratio"])
    every = RESULTS / "promql_small_queries.json"  # each query's median ms per side, to study
    every.write_text(json.dumps(per_query, indent=1))
    print(f"wrote {every}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--queries",
        type=Path,
        default=cached_queries(),
        help=f"a tester's promql-test-queries.yml (default: the newest one cached in {CACHED_QUERIES})",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a checkout of Artimon (e.g. /work/main) whose query API is timed beside this one's ('before')",
    )
    parser.add_argument(
        "--floor", type=int, default=None, metavar="N", help="time N trivial requests per side instead"
    )
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)  # a child: the API
    parser.add_argument("--end", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.end)
        return
    if args.queries is None:
        parser.error(
            f"no query file: none cached in {CACHED_QUERIES}; run benchmarks/promql_compliance.py "
            "once with --snapshots, or give --queries FILE from a snapshot of "
            "github.com/prometheus/compliance"
        )
    run(load_queries(args.queries), args.rounds, args.baseline, args.floor)


if __name__ == "__main__":
    main()
