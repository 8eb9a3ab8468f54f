"""Queries end to end through the HTTP APIs: Artimon's query API over VHMS against
Prometheus and VictoriaMetrics (Debian's ``prometheus`` and ``victoria-metrics``) holding the
same data, on this machine, in one run, at several series counts so that the growth of
each query's cost shows. Prints a table, writes results/query_bench.json.

Data, per size N: N counters ``app_requests_total`` (labels dc, rack, host, i: 50 series a
host, hosts dealt to 20 racks, 4 racks a dc) and N/10 gauges ``rack_temperature`` (integer
degrees, the same labels) x 3 hours of minutes (``--minutes``), made and loaded a block of
series at a time (``_query_data.py``: nothing holds a whole size, so that a million series
fit). Prometheus gets them as TSDB blocks (``promtool tsdb create-blocks-from openmetrics``),
VictoriaMetrics through ``/api/v1/import/prometheus``, VHMS through its ingest, with a finest
ring of 3 hours of minutes and more (``RESOLUTIONS``) so that every query reads 1-minute
buckets as the peers' do. Each
server runs in its own process (Artimon's query API and its store in a forked child), so
the client's work (the same for all: parsing each JSON answer) does not share a heap or a
GIL with any of them.

Fair by construction:

- the same function over the same samples on every side: PromQL's ``increase(x[10m])``
  reads the 11 samples of ``[t - 10m, t]`` (Prometheus 2; VictoriaMetrics the 10 of
  ``(t - 10m, t]`` and the one before), so Artimon's side is ``map(increase, 11m)``, the 11
  buckets ending at t; ``rate(x[5m])`` is ``map(rate, 6m)``. Every answer is checked against
  the peers' on the instants they share (the ``values`` column: the largest relative
  difference found);
- a range query over 1 h at 1-minute steps is, on Artimon's side, the fetch of that hour
  plus the window before it (its answer holds those leading instants too: more work on our
  side, none on theirs);
- every server settled before timing: each case starts once all three use less than 5% of
  a core over a second (VictoriaMetrics merges its parts in the background after an import,
  Prometheus compacts its blocks after a start);
- every round computes: VictoriaMetrics runs with ``-search.disableCache``, since a range
  query asked again would otherwise be answered from its rollup result cache, which
  measures the cache, not the query (Prometheus and Artimon keep no such cache);
  ``--vm-cache`` keeps it on;
- interleaved rounds: each of ``--repeat`` rounds asks each server once, in a rotating
  order, and each side's best round counts; a round is timed from the request to the
  decoded JSON answer (the HTTP body read in full, then parsed), with the client's garbage
  collector off while timing (as ``timeit`` does: decoding 100,000 series would otherwise
  set off collections of this process's heap, hundreds of ms of noise that lands on
  whichever answer triggers them). The JSON results also hold the best decoding time alone
  (``*_decode_ms``: the client's work, the floor of a wide answer).

Targets (issue 27): every aggregation, instant or range, at least 5x faster than the faster
peer; the raw matrix and the 3-hour gauge span at least 2x.

PromQL (issue 17): each case is also sent with the peers' PromQL text, unchanged, to
Artimon's ``/prometheus`` API (the ``promql`` column: the same engine and store, compiled
from PromQL), timed the same way and checked against the peers' answers too; same targets.

``--baseline DIR`` adds a side (``before``): the PromQL text sent to Artimon's query API
running the code of another checkout (``/work/main`` before a change) over the same data, in
the same interleaved rounds.

After the queries of a size, each server's resident memory is read from /proc
(results/query_bench_rss.json; Artimon's is its query API and store, one process).

Run: python benchmarks/query_bench.py [--quick] [--sizes 10000,100000] [--repeat 5]
[--peers prometheus,victoriametrics] [--minutes 180] [--vm-cache] [--baseline DIR] [--cases raw,gauge]
(the cases whose name holds one of these). A million
series (``--sizes 10000,100000,1000000 --repeat 3 --minutes 75``) peaked at 7.8 GB loading
(promtool 6.3 GB, 5 of them its input file's mapped pages; VHMS 1.4 GB) and need some 10 CPU
minutes to load: more than half an hour at a load average of 20 (docs/promql.md).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from _query_data import COUNTER, GAUGE, Data, load_store, load_victoria, prometheus_blocks
from _report import cpu_seconds, report, rss_mib

from bookkeeper.ground import BackgroundServer
from query_dsl import MemoryBudget
from query_dsl.evaluator import Limits
from query_dsl.http.api import create_app
from vhms import LocalClient
from vhms.server import Store

MINUTE = 60_000
MINUTES = 180  # of history: the gauge mean reads all of it, the range queries 70 minutes
# a finest ring longer than the history: a 3-hour span read from it whole (with 180 buckets
# its first minutes came from the 5-minute ring, the outside run found)
RESOLUTIONS = "60s:240,5m:48,15m:96,1h:72"
RACK = "r07"
SETTLED_CPU = 0.05  # a server is settled below 5% of a core over a second
SETTLE_TIMEOUT_S = 900
# what the serving commands call first, in their order
SERVING_SETTINGS = ("keep_pandas_out_of_pyarrow", "keep_freed_memory_returnable")


def progress(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_http(url: str, timeout: float = 120, alive: Callable[[], bool] = lambda: True) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"the server of {url} exited")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer")


def wait_settled(pids: dict[str, int], timeout: float = SETTLE_TIMEOUT_S) -> tuple[float, bool]:
    """Poll until every server of ``pids`` used less than ``SETTLED_CPU`` of a core over one
    second; the seconds it took and whether they settled. A server still busy at ``timeout``
    is named on stderr and the case runs anyway, marked unsettled in the results (its
    figures then include that server's background work)."""
    started = time.monotonic()
    while True:
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        time.sleep(1.0)
        busy = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
        if all(used < SETTLED_CPU for used in busy.values()):
            return time.monotonic() - started, True
        if time.monotonic() - started > timeout:
            progress(f"servers still busy after {timeout} s (CPU seconds over the last second): {busy}")
            return time.monotonic() - started, False


def timed(call: Callable[[], httpx.Response]) -> tuple[float, float, bytes]:
    """One round trip: request, the answer's body read in full and its JSON decoded (ms),
    the decoding alone (ms) and the body (the decoded answer is dropped: a million series
    decoded are about a GB, one side's at a time)."""
    gc.disable()  # as timeit does: a collection set off by this client's heap is noise
    try:
        started = time.perf_counter()
        response = call()  # httpx reads the whole body before it returns
        received = time.perf_counter()
        response.json()
        done = time.perf_counter()
    finally:
        gc.enable()
    response.raise_for_status()
    return (done - started) * 1000, (done - received) * 1000, response.content


def serve_artimon(data: Data, port: int) -> None:
    """The Artimon side, in a child process: VHMS loaded through its ingest, the query API
    over it, until terminated."""
    most = data.rows + 10
    store = Store(RESOLUTIONS, max_series=most, max_series_per_query=most, max_points_per_query=10**10)
    load_store(store, data)
    api = BackgroundServer(
        create_app(  # the limits lifted, memory budgets too: the sizes measured are the bench's to choose
            LocalClient(store),
            limits=Limits(max_points=10**10, max_series=10**8, timeout_s=600, max_bytes=1 << 40),
            budget=MemoryBudget(1 << 40),
        ),
        "127.0.0.1",
        port,
        name="bench-api",
    )
    api.start()
    threading.Event().wait()


def serve_artimon_lean(data: Data, port: int) -> None:
    """:func:`serve_artimon` as ``artimon api`` and ``artimon vhms`` serve: pyarrow kept from
    pandas, the allocators set so that freed memory can go back (docs/promql.md § Memory);
    in a ``--baseline`` child, those of the settings its checkout has."""
    import bookkeeper.ground as ground  # the checkout's: a baseline may have fewer settings

    for setting in SERVING_SETTINGS:
        if setting in ground.__all__:
            getattr(ground, setting)()
    serve_artimon(data, port)


PEERS = ("prometheus", "victoriametrics")
OURS = ("artimon", "promql", "before")  # the DSL, PromQL, PromQL on --baseline's code


def start_prometheus(data: Data, work: Path) -> tuple[subprocess.Popen[bytes], str]:
    blocks = prometheus_blocks(data, work)
    port = free_port()
    config = work / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\n")
    prometheus = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={blocks}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=30d",
            "--query.max-samples=2000000000",
            "--query.timeout=10m",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/-/ready")
    return prometheus, url


def start_victoria(data: Data, work: Path, cache: bool) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    flags = {
        "storageDataPath": work / "vm",
        "httpListenAddr": f"127.0.0.1:{port}",
        "retentionPeriod": 1,
        "search.maxUniqueTimeseries": 100_000_000,
        "search.maxSamplesPerQuery": 10_000_000_000,
        "search.maxQueryDuration": "10m",
        **({} if cache else {"search.disableCache": "true"}),
    }
    victoria = subprocess.Popen(
        ["victoria-metrics", *(f"-{flag}={value}" for flag, value in flags.items())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/health")
    load_victoria(data, port)
    return victoria, url


def start_baseline(checkout: Path, data: Data, port: int) -> subprocess.Popen[bytes]:
    """Artimon's query API running the code of another checkout (``--baseline``: main before
    a change) over the same data, served as that checkout's commands serve: this script's
    ``--serve`` with that checkout first on ``sys.path``."""
    return subprocess.Popen(
        [
            sys.executable,
            __file__,
            f"--serve={port}",
            f"--series={data.count}",
            f"--minutes={data.minutes}",
            f"--end={data.end}",
        ],
        env={**os.environ, "PYTHONPATH": str(checkout)},
        stdout=subprocess.DEVNULL,
    )


def run_size(
    count: int,
    repeat: int,
    peers: list[str],
    vm_cache: bool,
    minutes: int,
    baseline: Path | None,
    only: list[str],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One size: the rows of its cases and the resident memory of each server after them."""
    data = Data(count, minutes, int(time.time() * 1000) // MINUTE * MINUTE - MINUTE)
    work = Path(tempfile.mkdtemp(prefix="query-bench-"))
    progress(f"{count:,} counters and {count // 10:,} gauges x {minutes} minutes")
    api_port = free_port()
    # forked before this process starts a thread; the child loads VHMS while the peers load
    artimon = multiprocessing.get_context("fork").Process(
        target=serve_artimon_lean, args=(data, api_port), name="artimon", daemon=True
    )
    artimon.start()
    processes: dict[str, subprocess.Popen[bytes]] = {}
    sides = {"artimon": f"http://127.0.0.1:{api_port}", "promql": f"http://127.0.0.1:{api_port}/prometheus"}
    if baseline is not None:
        before_port = free_port()
        processes["before"] = start_baseline(baseline, data, before_port)
        sides["before"] = f"http://127.0.0.1:{before_port}/prometheus"
    try:
        if baseline is not None:
            wait_http(
                f"{sides['before']}/api/v1/labels",
                timeout=3600,
                alive=lambda: processes["before"].poll() is None,
            )
        for peer in peers:
            if peer == "prometheus":
                processes[peer], sides[peer] = start_prometheus(data, work)
            else:
                processes[peer], sides[peer] = start_victoria(data, work, vm_cache)
            progress(f"{peer} loaded")
        wait_http(f"{sides['artimon']}/api/v1/labels", timeout=3600, alive=artimon.is_alive)
        progress("vhms loaded")
        assert artimon.pid is not None
        pids = {"artimon": artimon.pid, **{peer: process.pid for peer, process in processes.items()}}
        rows = run_queries(sides, pids, data, repeat, only)
        return rows, {"series": count, **{f"{side}_mib": rss_mib(pid) for side, pid in pids.items()}}
    finally:
        for process in processes.values():
            process.terminate()
            process.wait(60)
        artimon.terminate()
        artimon.join(60)
        shutil.rmtree(work, ignore_errors=True)


@dataclass(frozen=True)
class Case:
    name: str
    target: float
    ours: str
    endpoint: str  # the peers': query or query_range
    params: dict[str, Any]


def cases(data: Data) -> list[Case]:
    """The issue's queries (27), as the peers get them, with our DSL's form beside each."""
    end, start = data.end, data.start
    at = end / 1000
    minutes = data.minutes
    history = f"{minutes // 60} h" if minutes % 60 == 0 else f"{minutes} min"
    hour = {"start": at - 3600, "end": at, "step": 60}
    increase_by_rack = "map(increase, 11m) | reduce(sum, by=[rack])"
    now = f'fetch("{COUNTER}", start={end}, end={end + 1})'
    share_ours = " / on(dc) group_left ".join(
        f'(fetch("{COUNTER}", start={end - 65 * MINUTE}, end={end + 1}) '
        f"| map(rate, 6m) | reduce(sum, by=[{by}]))"
        for by in ("dc, rack", "dc")
    )
    share_promql = (
        f"sum by (dc, rack) (rate({COUNTER}[5m])) / on(dc) group_left sum by (dc) (rate({COUNTER}[5m]))"
    )
    increase_promql = f"sum by (rack) (increase({COUNTER}[10m]))"
    return [
        Case(
            f"raw {COUNTER}{{rack={RACK}}}[10m]",
            2,
            f'fetch("{COUNTER}{{rack={RACK}}}", start={end - 10 * MINUTE}, end={end + 1})',
            "query",
            {"query": f'{COUNTER}{{rack="{RACK}"}}[10m]', "time": at},
        ),
        Case(
            "sum by rack of a 10-min increase",
            5,
            f'fetch("{COUNTER}", start={end - 10 * MINUTE}, end={end + 1}) | {increase_by_rack}',
            "query",
            {"query": increase_promql, "time": at},
        ),
        Case(
            "topk 10 of sum by host of rate[5m]",
            5,
            f'fetch("{COUNTER}", start={end - 5 * MINUTE}, end={end + 1}) '
            "| map(rate, 6m) | reduce(sum, by=[host]) | top(10)",
            "query",
            {"query": f"topk(10, sum by (host) (rate({COUNTER}[5m])))", "time": at},
        ),
        Case(
            "count",
            5,
            f"{now} | reduce(count)",
            "query",
            {"query": f"count({COUNTER})", "time": at},
        ),
        Case(
            "range: sum by rack of increase[10m], 1 h",
            5,
            f'fetch("{COUNTER}", start={end - 70 * MINUTE}, end={end + 1}) | {increase_by_rack}',
            "query_range",
            {"query": increase_promql, **hour},
        ),
        Case(
            "range: rack share of dc (rate[5m]), 1 h",
            5,
            share_ours,
            "query_range",
            {"query": share_promql, **hour},
        ),
        Case(
            f"range: mean by (dc, rack) of a gauge, {history} at 1 min",
            2,
            f'fetch("{GAUGE}", start={start}, end={end + 1}) | reduce(mean, by=[dc, rack])',
            "query_range",
            {"query": f"avg by (dc, rack) ({GAUGE})", "start": start / 1000, "end": at, "step": 60},
        ),
        Case(
            "matched division",
            5,
            f"{now} / on(dc, host, i, rack) {now}",
            "query",
            {"query": f"{COUNTER} / on(dc, host, i, rack) {COUNTER}", "time": at},
        ),
    ]


def ours_points(answer: dict[str, Any], keys: list[str]) -> dict[tuple[Any, ...], float]:
    """Artimon's answer as ``(labels restricted to keys..., time ms) -> value``."""
    points = {}
    for series in answer.get("series") or []:
        labels = tuple(series["labels"].get(k) for k in keys)
        for ts, value in zip(series["timestamps"], series["values"], strict=True):
            points[(*labels, ts)] = math.nan if value is None else float(value)
    return points


def peer_points(
    body: dict[str, Any], keys: list[str] | None = None
) -> tuple[list[str], dict[tuple[Any, ...], float]]:
    """A Prometheus API answer (vector or matrix) as its label keys (or ``keys``) and the
    same mapping."""
    result = body["data"]["result"]
    if keys is None:
        keys = sorted({k for series in result for k in series["metric"] if k != "__name__"})
    points = {}
    for series in result:
        labels = tuple(series["metric"].get(k) for k in keys)
        for ts, value in series.get("values") or [series["value"]]:
            points[(*labels, round(float(ts) * 1000))] = float(value)
    return keys, points


def difference(mine: dict[tuple[Any, ...], float], theirs: dict[tuple[Any, ...], float]) -> float:
    """The largest relative difference between Artimon's points and a peer's, over every
    point of the peer's answer (infinite when Artimon's answer lacks one)."""
    worst = 0.0
    for point, value in theirs.items():
        got = mine.get(point, math.nan)
        if math.isnan(got):
            return math.inf
        worst = max(worst, abs(got - value) / max(abs(value), 1e-300))
    return worst


def compare(bodies: dict[str, bytes], peers: list[str]) -> tuple[float, float, int]:
    """The largest relative differences of Artimon's DSL answer and of its PromQL answer to
    every peer's (over the peers' label keys), and the number of series of the DSL answer;
    the answers decoded one at a time."""
    worst = promql_worst = 0.0
    series_out = 0
    for peer in peers:
        keys, theirs = peer_points(json.loads(bodies[peer]))
        answer = json.loads(bodies["artimon"])
        series_out = len(answer.get("series") or [])
        worst = max(worst, difference(ours_points(answer, keys), theirs))
        del answer
        promql = peer_points(json.loads(bodies["promql"]), keys)[1]
        promql_worst = max(promql_worst, difference(promql, theirs))
    return worst, promql_worst, series_out


def run_queries(
    sides: dict[str, str], pids: dict[str, int], data: Data, repeat: int, only: list[str]
) -> list[dict[str, Any]]:
    peers = [side for side in sides if side not in OURS]
    rows = []
    with httpx.Client(timeout=1800) as client:
        for case in [case for case in cases(data) if not only or any(part in case.name for part in only)]:
            settle, settled = wait_settled(pids)
            calls: dict[str, Callable[[], httpx.Response]] = {
                "artimon": lambda c=case: client.post(
                    f"{sides['artimon']}/api/v1/query", json={"query": c.ours}
                ),
                "promql": lambda c=case: client.get(
                    f"{sides['promql']}/api/v1/{c.endpoint}", params=c.params
                ),
            }
            for peer in [side for side in sides if side == "before"] + peers:
                calls[peer] = lambda p=peer, c=case: client.get(
                    f"{sides[p]}/api/v1/{c.endpoint}", params=c.params
                )
            best = dict.fromkeys(calls, math.inf)
            decode = dict.fromkeys(calls, math.inf)
            every: dict[str, list[float]] = {side: [] for side in calls}
            bodies: dict[str, bytes] = {}
            order = list(calls)
            for round_ in range(repeat):
                turn = round_ % len(order)
                for side in order[turn:] + order[:turn]:
                    ms, decode_ms, bodies[side] = timed(calls[side])
                    best[side], decode[side] = min(best[side], ms), min(decode[side], decode_ms)
                    every[side].append(ms)
            fastest_peer = min(best[peer] for peer in peers)
            speedup, promql_speedup = fastest_peer / best["artimon"], fastest_peer / best["promql"]
            worst, promql_worst, series_out = compare(bodies, peers)
            del bodies
            timings = ", ".join(f"{side} {best[side]:.1f} ms" for side in order)
            progress(
                f"{data.count:,} | {case.name}: {timings} ({speedup:.1f}x, PromQL {promql_speedup:.1f}x; "
                f"{series_out} series; values differ by at most {worst:.1g}, PromQL's {promql_worst:.1g}; "
                f"settled in {settle:.0f} s)"
            )
            rows.append(
                {
                    "series": data.count,
                    "case": case.name,
                    **{f"{side}_ms": best[side] for side in order},
                    "speedup": speedup,
                    "target": f">= {case.target:g}x",
                    "met": speedup >= case.target,
                    "values_rel_diff": worst,
                    "promql_speedup": promql_speedup,
                    "promql_met": promql_speedup >= case.target,
                    "promql_values_rel_diff": promql_worst,
                    **(
                        {
                            "before_speedup": fastest_peer / best["before"],
                            "promql_vs_before": best["before"] / best["promql"],
                        }
                        if "before" in best
                        else {}
                    ),
                    **{f"{side}_median_ms": statistics.median(times) for side, times in every.items()},
                    "series_out": series_out,
                    **{f"{side}_decode_ms": decode[side] for side in order},
                    "settled_s": settle,
                    "settled": settled,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="10,000 series only")
    parser.add_argument(
        "--sizes", default="10000,100000", help="counter counts, comma-separated (default 10000,100000)"
    )
    parser.add_argument("--series", type=int, default=None, help="one size (same as --sizes N)")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds per query")
    parser.add_argument(
        "--peers", default=",".join(PEERS), help=f"comma-separated, of {', '.join(PEERS)} (default both)"
    )
    parser.add_argument(
        "--vm-cache",
        action="store_true",
        help="keep VictoriaMetrics's rollup result cache on (off by default: each round computes)",
    )
    parser.add_argument(
        "--minutes",
        type=int,
        default=MINUTES,
        help="minutes of history (default 180; at least 75: the range queries read 70, the mean reads all)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a checkout of Artimon (e.g. /work/main) whose PromQL is timed beside this one's ('before')",
    )
    parser.add_argument(
        "--cases",
        default="",
        help="only the cases whose name holds one of these, comma-separated (default all)",
    )
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)  # a --baseline child
    parser.add_argument("--end", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve_artimon_lean(Data(args.series, args.minutes, args.end), args.serve)
        return
    if args.minutes < 75:
        parser.error(f"--minutes {args.minutes}: the range queries read 70 minutes, give at least 75")
    sizes = (
        [10_000] if args.quick else [args.series] if args.series else [int(s) for s in args.sizes.split(",")]
    )
    peers = args.peers.split(",")
    if set(peers) - set(PEERS):
        parser.error(f"--peers {args.peers}: give some of {', '.join(PEERS)}")
    rows, memory = [], []
    only = [c for c in args.cases.split(",") if c]
    for count in sizes:
        size_rows, rss = run_size(count, args.repeat, peers, args.vm_cache, args.minutes, args.baseline, only)
        rows.extend(size_rows)
        memory.append(rss)
        progress(f"{count:,}: RSS after the queries (MiB) {rss}")
    report(
        "query_bench",
        rows,
        [
            "series",
            "case",
            "artimon_ms",
            "prometheus_ms",
            "victoriametrics_ms",
            "speedup",
            "target",
            "met",
            "values_rel_diff",
            "promql_ms",
            "promql_speedup",
            "promql_met",
            "promql_values_rel_diff",
            *(["before_ms", "promql_vs_before"] if args.baseline else []),
        ],
    )
    report("query_bench_rss", memory, ["series", *(f"{side}_mib" for side in ("artimon", *peers, "before"))])


if __name__ == "__main__":
    main()
