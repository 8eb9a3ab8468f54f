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
  order, and each side's best round counts; a round is timed from the request to the HTTP
  body read in full (what a server's latency is; until 2026-11-27 it also counted the
  client decoding the JSON, which is this Python client's work, the same on every side,
  and at a million series most of an answer's time: up to a second of a 1M-series answer).
  The answer is then decoded, untimed but for the JSON results' best decoding time
  (``*_decode_ms``), with the client's garbage collector off (as ``timeit`` does: decoding
  100,000 series would otherwise set off collections of this process's heap, hundreds of
  ms of noise that would land on whichever answer comes next).

Targets (issue 27): every aggregation, instant or range, at least 5x faster than the faster
peer; the raw matrix and the 3-hour gauge span at least 2x.

PromQL (issue 17): each case is also sent with the peers' PromQL text, unchanged, to
Artimon's ``/prometheus`` API (the ``promql`` column: the same engine and store, compiled
from PromQL), timed the same way and checked against the peers' answers too; same targets.

``--baseline DIR`` adds a side (``before``): the PromQL text sent to Artimon's query API
running the code of another checkout (``/work/main`` before a change) over the same data, in
the same interleaved rounds.

Sizes: one after another by default (a size's servers loaded, its cases timed, stopped).
``--together`` loads the sizes one after another and keeps them all up (a million series'
servers hold some 1.5-2 GB each once loaded), then each case's rounds ask every side at
every size, a side's sizes next to each other in a rotating order: each query's growth
from one size to the next (results/query_bench_growth.json, per case and side) then comes
from timings of the same minutes, where sizes timed one after another mix the machine's
load with the size. After the queries each server's resident memory is read from /proc,
per size (results/query_bench_rss.json; Artimon's is its query API and store, one process).

``--peer-cache DIR`` (e.g. ``~/.cache/artimon/query_bench``) keeps each peer's store per
size of a data set (minutes, end time, ``DATA_VERSION``, the peers' binaries) and starts
the peers on copies of it on a rerun, with the data's end time taken from the cache so that
VHMS is loaded with the same samples (``_query_cache.py``); promtool's blocks and the
VictoriaMetrics import take some 14 minutes at a million series.

Run: python benchmarks/query_bench.py [--quick] [--sizes 10000,100000] [--repeat 5]
[--together] [--peer-cache DIR] [--peers prometheus,victoriametrics] [--minutes 180]
[--vm-cache] [--baseline DIR] [--cases raw,gauge] (the cases whose name holds one of
these). A million series (``--sizes 10000,100000,1000000 --repeat 3 --minutes 75``) peaked
at 7.8 GB loading (promtool 6.3 GB, 5 of them its input file's mapped pages; VHMS 1.4 GB)
(docs/promql.md).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import itertools
import math
import multiprocessing
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _query_cache import PeerCache
from _query_cases import PEERS, Case, case_row, cases, growth, growth_line
from _query_data import MINUTE, Data
from _query_servers import (
    free_port,
    serve_artimon_lean,
    start_baseline,
    start_prometheus,
    start_victoria,
    wait_http,
    wait_settled,
)
from _report import progress, report, rss_mib

MINUTES = 180  # of history: the gauge mean reads all of it, the range queries 70 minutes


def timed(call: Callable[[], httpx.Response]) -> tuple[float, float, bytes]:
    """One round trip: request to the answer's body read in full (ms), then its JSON
    decoding alone (ms), and the body (the decoded answer is dropped: a million series
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
    return (received - started) * 1000, (done - received) * 1000, response.content


@dataclass
class Up:
    """One size's servers, loaded and answering: each side's URL and process id."""

    data: Data
    sides: dict[str, str] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Options:
    repeat: int
    peers: list[str]
    vm_cache: bool
    baseline: Path | None
    only: list[str]
    cache: PeerCache | None


def start_size(data: Data, options: Options, stack: contextlib.ExitStack) -> Up:
    """Start and load one size's servers (each stopped, and its files deleted, when ``stack``
    closes); return once every one answers."""
    work = Path(tempfile.mkdtemp(prefix="query-bench-"))
    stack.callback(shutil.rmtree, work, ignore_errors=True)
    progress(f"{data.count:,} counters and {data.count // 10:,} gauges x {data.minutes} minutes")
    up = Up(data)
    api_port = free_port()
    # forked (this process starts no thread); the child loads VHMS while the peers load
    artimon = multiprocessing.get_context("fork").Process(
        target=serve_artimon_lean, args=(data, api_port), name="artimon", daemon=True
    )
    artimon.start()
    stack.callback(artimon.join, 60)
    stack.callback(artimon.terminate)
    up.sides = {
        "artimon": f"http://127.0.0.1:{api_port}",
        "promql": f"http://127.0.0.1:{api_port}/prometheus",
    }
    processes: dict[str, subprocess.Popen[bytes]] = {}
    if options.baseline is not None:
        before_port = free_port()
        processes["before"] = start_baseline(options.baseline, data, before_port)
        stack.callback(stop, processes["before"])
        up.sides["before"] = f"http://127.0.0.1:{before_port}/prometheus"
        before = processes["before"]
        wait_http(f"{up.sides['before']}/api/v1/labels", timeout=3600, alive=lambda: before.poll() is None)
    for peer in options.peers:
        if peer == "prometheus":
            processes[peer], up.sides[peer] = start_prometheus(data, work, options.cache)
        else:
            processes[peer], up.sides[peer] = start_victoria(data, work, options.vm_cache, options.cache)
        stack.callback(stop, processes[peer])
        progress(f"{data.count:,}: {peer} loaded")
    wait_http(f"{up.sides['artimon']}/api/v1/labels", timeout=3600, alive=artimon.is_alive)
    progress(f"{data.count:,}: vhms loaded")
    assert artimon.pid is not None
    up.pids = {"artimon": artimon.pid, **{side: process.pid for side, process in processes.items()}}
    return up


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(60)


def calls_of(client: httpx.Client, up: Up, case: Case) -> dict[str, Callable[[], httpx.Response]]:
    """One request per side of one size for ``case``: the DSL's, then the PromQL text's."""
    sides = up.sides
    calls: dict[str, Callable[[], httpx.Response]] = {
        "artimon": functools.partial(
            client.post, f"{sides['artimon']}/api/v1/query", json={"query": case.ours}
        ),
    }
    for side in [side for side in sides if side != "artimon"]:
        calls[side] = functools.partial(
            client.get, f"{sides[side]}/api/v1/{case.endpoint}", params=case.params
        )
    return calls


Key = tuple[int, str]  # (series, side)


def rounds(
    calls: dict[Key, Callable[[], httpx.Response]], repeat: int
) -> tuple[dict[Key, list[float]], dict[Key, float], dict[Key, bytes]]:
    """``repeat`` rounds, each asking every (size, side) of ``calls`` once, in an order
    rotated by a ``repeat``-th of its length each round (each side at its sizes one after
    another, so that a side's growth is timed in the same seconds): every time of each, its
    best decoding time and its last answer's body."""
    sides = list(dict.fromkeys(side for _, side in calls))
    order = sorted(calls, key=lambda key: (sides.index(key[1]), key[0]))
    every: dict[Key, list[float]] = {key: [] for key in order}
    decode = dict.fromkeys(order, math.inf)
    bodies: dict[Key, bytes] = {}
    step = max(1, len(order) // repeat)
    for round_ in range(repeat):
        turn = round_ * step % len(order)
        for key in order[turn:] + order[:turn]:
            ms, decode_ms, bodies[key] = timed(calls[key])
            every[key].append(ms)
            decode[key] = min(decode[key], decode_ms)
    return every, decode, bodies


def run_queries(ups: list[Up], repeat: int, only: list[str]) -> list[dict[str, Any]]:
    """Every case over the servers of ``ups`` (one size, or all sizes at once), in the same
    interleaved rounds: a row per case and size."""
    rows = []
    with httpx.Client(timeout=1800) as client:
        for number, case in enumerate(cases(ups[0].data)):
            if only and not any(part in case.name for part in only):
                continue
            settle, settled = wait_settled(
                {f"{up.data.count}:{side}": pid for up in ups for side, pid in up.pids.items()}
            )
            load = os.getloadavg()[0]
            calls = {
                (up.data.count, side): call
                for up in ups
                for side, call in calls_of(client, up, cases(up.data)[number]).items()
            }
            every, decode, bodies = rounds(calls, repeat)
            for up in ups:
                count = up.data.count
                row = case_row(
                    case,
                    count,
                    {side: every[(count, side)] for side in up.sides},
                    {side: decode[(count, side)] for side in up.sides},
                    {side: bodies.pop((count, side)) for side in up.sides},
                )
                progress(f"{row.pop('line')}; settled in {settle:.0f} s, load {load:.1f}")
                rows.append({**row, "settled_s": settle, "settled": settled, "load_1m": load})
            if len(ups) > 1:
                progress(f"growth | {case.name}: {growth_line(rows[-len(ups) :])}")
    return rows


def measure(sizes: list[int], minutes: int, together: bool, options: Options) -> None:
    """Every size's servers up in turn (or, ``together``, loaded one size after another and
    all kept up, each case's rounds then asking every size), the queries timed; then the
    tables and JSON files: the cases, each server's RSS, the growth per case and side."""
    now_end = int(time.time() * 1000) // MINUTE * MINUTE - MINUTE
    end = now_end if options.cache is None else options.cache.end(sizes, now_end)
    progress(f"data ending at {time.strftime('%H:%M', time.gmtime(end / 1000))} UTC ({end})")
    rows: list[dict[str, Any]] = []
    memory: list[dict[str, Any]] = []
    groups = [sizes] if together else [[count] for count in sizes]
    for group in groups:
        with contextlib.ExitStack() as stack:
            ups = [start_size(Data(count, minutes, end), options, stack) for count in group]
            rows.extend(run_queries(ups, options.repeat, options.only))
            for up in ups:
                memory.append(
                    {
                        "series": up.data.count,
                        **{f"{side}_mib": rss_mib(pid) for side, pid in up.pids.items()},
                    }
                )
                progress(f"{up.data.count:,}: RSS after the queries (MiB) {memory[-1]}")
    sides = ("artimon", *options.peers, "promql", *(["before"] if options.baseline else []))
    report(
        "query_bench",
        rows,
        [
            "series",
            "case",
            *(f"{side}_ms" for side in sides),
            "speedup",
            "target",
            "met",
            "values_rel_diff",
            "promql_speedup",
            "promql_met",
            "promql_values_rel_diff",
            *(["promql_vs_before"] if options.baseline else []),
            "load_1m",
        ],
    )
    report(
        "query_bench_rss",
        memory,
        ["series", *(f"{side}_mib" for side in ("artimon", *options.peers, "before"))],
    )
    if len(sizes) > 1:
        pairs = list(itertools.pairwise(sizes))
        report(
            "query_bench_growth",
            growth(rows, together),
            ["case", "side", *(f"{count}_ms" for count in sizes), *(f"growth_{a}_{b}" for a, b in pairs)],
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="10,000 series only")
    parser.add_argument(
        "--sizes", default="10000,100000", help="counter counts, comma-separated (default 10000,100000)"
    )
    parser.add_argument("--series", type=int, default=None, help="one size (same as --sizes N)")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds per query")
    parser.add_argument(
        "--together",
        action="store_true",
        help="every size's servers up at once, each query's rounds asking every side at every size "
        "(growth from timings of the same minutes); default: one size after another",
    )
    parser.add_argument(
        "--peer-cache",
        type=Path,
        default=None,
        help="keep the peers' stores here per data set and start them on it on a rerun "
        "(e.g. ~/.cache/artimon/query_bench; default: rebuilt every run)",
    )
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
    options = Options(
        repeat=args.repeat,
        peers=peers,
        vm_cache=args.vm_cache,
        baseline=args.baseline,
        only=[c for c in args.cases.split(",") if c],
        cache=None if args.peer_cache is None else PeerCache(args.peer_cache, args.minutes),
    )
    measure(sorted(sizes), args.minutes, args.together, options)


if __name__ == "__main__":
    main()
