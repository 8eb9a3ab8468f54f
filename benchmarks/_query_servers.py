"""The servers of ``query_bench.py``: Artimon's query API over VHMS (in a forked child, or
running another checkout's code for ``--baseline``), Prometheus and VictoriaMetrics (from
the peer cache when given one, ``_query_cache.py``), and the waits for them to answer and to
settle."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from _query_cache import PeerCache, keep, restore
from _query_data import Data, load_store, load_victoria, prometheus_blocks
from _report import cpu_seconds, progress

from bookkeeper.ground import BackgroundServer
from query_dsl import MemoryBudget
from query_dsl.evaluator import Limits
from query_dsl.http.api import create_app
from vhms import LocalClient
from vhms.server import Store

# a finest ring longer than the history: a 3-hour span read from it whole (with 180 buckets
# its first minutes came from the 5-minute ring, the outside run found)
RESOLUTIONS = "60s:240,5m:48,15m:96,1h:72"
SETTLED_CPU = 0.05  # a server is settled below 5% of a core over a second
SETTLE_TIMEOUT_S = 900
# what the serving commands call first, in their order (the first, a baseline's: a checkout
# from before issue 27 took pyarrow out of the serving processes)
SERVING_SETTINGS = ("keep_pandas_out_of_pyarrow", "keep_freed_memory_returnable")


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
    """:func:`serve_artimon` as ``artimon api`` and ``artimon vhms`` serve: the allocators set
    so that freed memory can go back (docs/promql.md § Memory); in a ``--baseline`` child,
    those of the settings its checkout has."""
    import bookkeeper.ground as ground  # the checkout's: a baseline may have fewer settings

    for setting in SERVING_SETTINGS:
        if setting in ground.__all__:
            getattr(ground, setting)()
    serve_artimon(data, port)


def start_prometheus(data: Data, work: Path, cache: PeerCache | None) -> tuple[subprocess.Popen[bytes], str]:
    """Prometheus over TSDB blocks of ``data``: built by promtool, or a copy of the blocks
    ``cache`` kept of the same data (built and kept first when it has none)."""
    entry = None if cache is None else cache.entry(data.count, data.end, "prometheus")
    if entry is None or not entry.exists():
        prometheus_blocks(data, work, work / "prometheus")
        if entry is not None:
            keep(work / "prometheus", entry)
    else:
        restore(entry, work)
    port = free_port()
    config = work / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\n")
    prometheus = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={work / 'prometheus'}",
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


def run_victoria(storage: Path, cache: bool) -> tuple[subprocess.Popen[bytes], int]:
    """VictoriaMetrics on ``storage``, answering; its rollup result cache off unless ``cache``."""
    port = free_port()
    flags = {
        "storageDataPath": storage,
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
    wait_http(f"http://127.0.0.1:{port}/health")
    return victoria, port


def start_victoria(
    data: Data, work: Path, vm_cache: bool, cache: PeerCache | None
) -> tuple[subprocess.Popen[bytes], str]:
    """VictoriaMetrics holding ``data``: imported, or started on a copy of the storage
    ``cache`` kept of the same data (imported, stopped, kept and started again when it has
    none: the storage is copied while no process writes it)."""
    entry = None if cache is None else cache.entry(data.count, data.end, "victoriametrics")
    if entry is not None and entry.exists():
        victoria, port = run_victoria(restore(entry, work), vm_cache)
        return victoria, f"http://127.0.0.1:{port}"
    storage = work / "victoriametrics"
    victoria, port = run_victoria(storage, vm_cache)
    load_victoria(data, port)
    if entry is not None:
        victoria.terminate()
        victoria.wait(120)
        keep(storage, entry)
        victoria, port = run_victoria(storage, vm_cache)
    return victoria, f"http://127.0.0.1:{port}"


def start_baseline(checkout: Path, data: Data, port: int) -> subprocess.Popen[bytes]:
    """Artimon's query API running the code of another checkout (``--baseline``: main before
    a change) over the same data, served as that checkout's commands serve: this script's
    ``--serve`` with that checkout first on ``sys.path``."""
    return subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("query_bench.py")),
            f"--serve={port}",
            f"--series={data.count}",
            f"--minutes={data.minutes}",
            f"--end={data.end}",
        ],
        env={**os.environ, "PYTHONPATH": str(checkout)},
        stdout=subprocess.DEVNULL,
    )
