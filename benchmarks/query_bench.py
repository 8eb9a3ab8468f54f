"""Queries end to end through the HTTP APIs: Artimon's query API over VHMS against
Prometheus and VictoriaMetrics (Debian's ``prometheus`` and ``victoria-metrics``) holding the
same data, on this machine, in one run. Prints a table, writes results/query_bench.json.

Data: ``--series`` counters (default 100,000; labels dc, rack, host, i) x 3 hours of
minutes. Prometheus gets them as TSDB blocks (``promtool tsdb create-blocks-from
openmetrics``), VictoriaMetrics through ``/api/v1/import/prometheus``, VHMS through its
ingest, with a finest ring of 3 hours of minutes (``RESOLUTIONS``) so that every query reads
1-minute buckets as the peers' do. Each server runs in its own process (Artimon's query API
and its store in a forked child), so the client's work (the same for all: parsing each JSON
answer) does not share a heap or a GIL with any of them. Each query is timed as the best of
``--repeat`` runs over HTTP, the client decoding the JSON answer, with the client's garbage
collector off while timing (as ``timeit`` does: decoding 100,000 series would otherwise set
off collections of this process's heap, hundreds of ms of noise that lands on whichever
answer triggers them). The JSON results also hold the best decoding time alone
(``*_decode_ms``: the client's work, the floor of a wide answer).

Target (issue 8): each query at least as fast as the faster peer, the aggregations at
least 5x faster (moonshot 10x).

Run: python benchmarks/query_bench.py [--quick] [--series N]
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from _report import report

from bookkeeper.wire.httpserver import BackgroundServer
from query_dsl.api import create_app
from query_dsl.evaluator import Limits
from query_dsl.sources import StoreSource
from vhms import Store

MINUTE = 60_000
HOURS = 3
RESOLUTIONS = "60s:180,5m:48,15m:96,1h:72"


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def labels_of(i: int) -> dict[str, str]:
    host = i // 50
    return {"dc": f"dc{host // 400 % 5}", "host": f"h{host}", "i": str(i % 50), "rack": f"r{host // 40 % 50}"}


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


def timed(call: Callable[[], httpx.Response], repeat: int) -> tuple[float, float, Any]:
    """The best of ``repeat`` round trips (request, answer and its JSON decoding), the best
    decoding alone (client work, in ms both) and the decoded answer."""
    best = decode = float("inf")
    answer = None
    for _ in range(repeat):
        gc.disable()  # as timeit does: a collection set off by this client's heap is noise
        try:
            started = time.perf_counter()
            response = call()
            received = time.perf_counter()
            answer = response.json()
            done = time.perf_counter()
        finally:
            gc.enable()
        best, decode = min(best, done - started), min(decode, done - received)
    return best * 1000, decode * 1000, answer


def serve_artimon(keys: list[str], values: np.ndarray, start: int, port: int) -> None:
    """The Artimon side, in a child process: VHMS loaded through its ingest, the query API
    over it, until terminated."""
    count, minutes = values.shape
    store = Store(
        RESOLUTIONS, max_series=count + 10, max_series_per_query=count + 10, max_points_per_query=10**9
    )
    for minute in range(minutes):
        store.ingest(keys, values[:, minute], np.full(count, start + minute * MINUTE))
    api = BackgroundServer(
        create_app(StoreSource(store), limits=Limits(max_points=10**9, max_series=10**7)),
        "127.0.0.1",
        port,
        name="bench-api",
    )
    api.start()
    threading.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="10,000 series")
    parser.add_argument("--series", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    count = args.series or (10_000 if args.quick else 100_000)
    minutes = HOURS * 60
    end = int(time.time() * 1000) // MINUTE * MINUTE - MINUTE
    start = end - (minutes - 1) * MINUTE
    work = Path(tempfile.mkdtemp(prefix="query-bench-"))
    rng = np.random.default_rng(5)
    increments = rng.integers(0, 20, size=(count, minutes))
    values = np.cumsum(increments, axis=1).astype(np.float64)
    all_labels = [labels_of(i) for i in range(count)]
    keys = [f"req{{dc={lab['dc']},host={lab['host']},i={lab['i']},rack={lab['rack']}}}" for lab in all_labels]
    prom_labels = [",".join(f'{k}="{v}"' for k, v in lab.items()) for lab in all_labels]

    progress(f"{count:,} series x {minutes} minutes = {count * minutes:,} samples")
    api_port = free_port()
    # forked before this process starts a thread; the child loads VHMS while the peers load
    artimon = multiprocessing.get_context("fork").Process(
        target=serve_artimon, args=(keys, values, start, api_port), name="artimon", daemon=True
    )
    artimon.start()

    openmetrics = work / "data.om"
    with open(openmetrics, "w") as out:
        out.write("# TYPE req counter\n")
        for minute in range(minutes):
            ts = (start + minute * MINUTE) / 1000
            column = values[:, minute]
            out.writelines(f"req_total{{{prom_labels[i]}}} {column[i]:.0f} {ts:.0f}\n" for i in range(count))
        out.write("# EOF\n")
    progress(f"openmetrics written ({openmetrics.stat().st_size / 1e6:.0f} MB)")
    prom_dir = work / "prometheus"
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(prom_dir)],
        check=True,
        capture_output=True,
    )
    prom_port = free_port()
    config = work / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\n")
    prometheus = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={prom_dir}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            "--storage.tsdb.retention.time=30d",
            "--query.max-samples=200000000",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    vm_port = free_port()
    victoria = subprocess.Popen(
        [
            "victoria-metrics",
            f"-storageDataPath={work / 'vm'}",
            f"-httpListenAddr=127.0.0.1:{vm_port}",
            "-retentionPeriod=1",
            "-search.maxUniqueTimeseries=10000000",
            "-search.maxSamplesPerQuery=1000000000",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://127.0.0.1:{api_port}/api/v1/labels", timeout=1800, alive=artimon.is_alive)
        progress("vhms loaded")
        wait_http(f"http://127.0.0.1:{prom_port}/-/ready")
        wait_http(f"http://127.0.0.1:{vm_port}/health")
        progress("prometheus and victoria-metrics up; importing into victoria-metrics")
        with httpx.Client(timeout=600) as client:
            chunk: list[str] = []
            for minute in range(minutes):
                ts = start + minute * MINUTE
                column = values[:, minute]
                chunk.extend(f"req_total{{{prom_labels[i]}}} {column[i]:.0f} {ts}\n" for i in range(count))
                if len(chunk) >= 500_000 or minute == minutes - 1:
                    client.post(
                        f"http://127.0.0.1:{vm_port}/api/v1/import/prometheus", content="".join(chunk)
                    ).raise_for_status()
                    chunk = []
            client.get(f"http://127.0.0.1:{vm_port}/internal/force_flush").raise_for_status()
        progress("victoria-metrics loaded")
        rows = run_queries(f"http://127.0.0.1:{api_port}", prom_port, vm_port, start, end, args.repeat, count)
    finally:
        for process in (prometheus, victoria):
            process.terminate()
            process.wait(30)
        artimon.terminate()
        artimon.join(30)
        shutil.rmtree(work, ignore_errors=True)
    report(
        "query_bench",
        rows,
        ["case", "artimon_ms", "prometheus_ms", "victoriametrics_ms", "speedup", "target", "met", "series"],
    )


def run_queries(
    api_url: str, prom_port: int, vm_port: int, start: int, end: int, repeat: int, count: int
) -> list[dict]:
    at = end / 1000
    cases = [
        (
            "raw fetch, one rack, 10 min",
            False,
            f'fetch("req{{rack=r1}}", start={end - 9 * MINUTE}, end={end + 1})',
            ("query_range", {"query": 'req_total{rack="r1"}', "start": at - 540, "end": at, "step": 60}),
        ),
        (
            "sum by rack of a 10-min delta",
            True,
            f'fetch("req", start={end - 9 * MINUTE}, end={end + 1})'
            " | map(delta, 10m) | reduce(sum, by=[rack])",
            ("query", {"query": "sum by (rack) (increase(req_total[10m]))", "time": at}),
        ),
        (
            "mean by (dc, rack), 3 h at 1 min",
            True,
            f'fetch("req", start={start}, end={end + 1}) | reduce(mean, by=[dc, rack])',
            (
                "query_range",
                {"query": "avg by (dc, rack) (req_total)", "start": start / 1000, "end": at, "step": 60},
            ),
        ),
        (
            "matched division",
            True,
            f'fetch("req", start={end}, end={end + 1})'
            f' / on(dc, host, i, rack) fetch("req", start={end}, end={end + 1})',
            ("query", {"query": "req_total / on(dc, host, i, rack) req_total", "time": at}),
        ),
        (
            "top 10",
            True,
            f'fetch("req", start={end}, end={end + 1}) | top(10)',
            ("query", {"query": "topk(10, req_total)", "time": at}),
        ),
    ]
    rows = []
    with httpx.Client(timeout=600) as client:
        for name, aggregation, ours, (endpoint, params) in cases:
            ours_ms, ours_decode, answer = timed(
                lambda q=ours: client.post(f"{api_url}/api/v1/query", json={"query": q}), repeat
            )
            series = len(answer.get("series") or [])
            peers, decodes = {}, {}
            for peer, port in (("prometheus", prom_port), ("victoriametrics", vm_port)):
                ms, decodes[peer], body = timed(
                    lambda p=port, e=endpoint, ps=params: client.get(
                        f"http://127.0.0.1:{p}/api/v1/{e}", params=ps
                    ),
                    repeat,
                )
                peers[peer] = ms
                got = len(body.get("data", {}).get("result", []))
                progress(
                    f"{name}: {peer} {ms:.1f} ms, {decodes[peer]:.1f} of them decoding JSON ({got} series)"
                )
            faster = min(peers.values())
            speedup = faster / ours_ms
            progress(
                f"{name}: artimon {ours_ms:.1f} ms, {ours_decode:.1f} of them decoding JSON "
                f"({series} series), {speedup:.1f}x the faster peer"
            )
            rows.append(
                {
                    "case": name,
                    "artimon_ms": ours_ms,
                    "prometheus_ms": peers["prometheus"],
                    "victoriametrics_ms": peers["victoriametrics"],
                    "speedup": speedup,
                    "target": ">= 5x" if aggregation else ">= 1x",
                    "met": speedup >= (5 if aggregation else 1),
                    "series": series,
                    "artimon_decode_ms": ours_decode,
                    "prometheus_decode_ms": decodes["prometheus"],
                    "victoriametrics_decode_ms": decodes["victoriametrics"],
                }
            )
    return rows


if __name__ == "__main__":
    main()
