"""How fast ``artimon vhms`` and ``artimon api`` start and what they hold once serving
(issue 27's start-up), in fresh processes, the median of N interleaved runs each:

- **import s**: wall time of ``python -c "import artimon.commands.<name>"`` (the interpreter's
  own start included: the ``python -c pass`` row), and its CPU time (``import_cpu``: what a
  loaded machine does not change much);
- **first answer s**: from spawning ``python -m artimon <name> ...`` to its first answered
  HTTP request (VHMS: ``GET /health``; the API: ``GET /api/v1/labels``, which reads the shard),
  and the CPU time the process had used by then (``first_cpu``);
- **RSS MiB**: resident memory after its first work (VHMS: an ingest of 1,000 series and a
  fetch over Thrift; the API: a DSL and a PromQL query over them);
- **unneeded**: which of ``HEAVY`` (modules serving does not use) the process had imported
  when it stopped (its ``sys.modules``, written at exit).

``--baseline DIR`` runs every case also with another checkout's code (``PYTHONPATH=DIR``,
e.g. a ``git archive`` of main before a change; ``-P`` keeps the working directory off
``sys.path``) in the same interleaved rounds. The API's cases read one VHMS this script
starts. Prints a table, writes results/startup_bench.json.

Run: python benchmarks/startup_bench.py [--runs 7] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from _report import cpu_seconds, report, rss_mib

from bookkeeper.wire import IngestColumns
from vhms import VhmsClient

HEAVY = ("pandas", "pyspark", "collector_agent", "fastavro", "httpx", "yaml", "bcrypt", "kazoo")
SERIES = 1_000
START_TIMEOUT_S = 120
# ``artimon`` as its console script runs it, with the process's modules written at exit
MAIN = (
    "import atexit, os, sys\n"
    "atexit.register(lambda: open(os.environ['BENCH_MODULES'], 'w').write('\\n'.join(sys.modules)))\n"
    "from artimon.cli import main\n"
    "sys.exit(main())\n"
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def environment(code: Path | None, **more: str) -> dict[str, str]:
    return {**os.environ, **({"PYTHONPATH": str(code)} if code else {}), **more}


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def imports(module: str | None, code: Path | None) -> dict[str, float]:
    """Wall and CPU seconds of a fresh ``python -c "import <module>"``."""
    started, cpu = time.perf_counter(), children_cpu()
    statement = f"import {module}" if module else "pass"
    subprocess.run([sys.executable, "-P", "-c", statement], check=True, env=environment(code))
    return {"import": time.perf_counter() - started, "import_cpu": children_cpu() - cpu}


def wait_answer(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.01)
    raise RuntimeError(f"{url} did not answer in {START_TIMEOUT_S} s")


@contextmanager
def command(
    arguments: list[str], code: Path | None, work: Path
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """``artimon <arguments>`` running (terminated on leaving), and the file its modules are
    written to when it stops."""
    modules = Path(tempfile.mkstemp(dir=work, suffix=".modules")[1])
    process = subprocess.Popen(
        [sys.executable, "-P", "-c", MAIN, *arguments],
        env=environment(code, BENCH_MODULES=str(modules)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process, modules
    finally:
        process.terminate()
        process.wait(60)


def unneeded(modules: Path) -> str:
    loaded = {name.partition(".")[0] for name in modules.read_text().split()}
    return ",".join(name for name in HEAVY if name in loaded) or "-"


def vhms_arguments(work: Path) -> tuple[list[str], int, str]:
    port, http_port = free_port(), free_port()
    arguments = ["vhms", "--no-register", "--no-wal", f"--port={port}", f"--http-port={http_port}"]
    return (
        [*arguments, f"--data-dir={tempfile.mkdtemp(dir=work)}"],
        port,
        f"http://127.0.0.1:{http_port}/health",
    )


def fill(port: int) -> None:
    keys = [f"bench_requests_total{{host=h{i},rack=r{i % 10}}}" for i in range(SERIES)]
    now = int(time.time() * 1000)
    batch = IngestColumns.from_keys(keys, np.arange(SERIES, dtype=np.float64), np.full(SERIES, now))
    with VhmsClient("127.0.0.1", port) as client:
        client.ingest(batch)
        client.fetch("bench_requests_total", now - 600_000, now)


def run_vhms(code: Path | None, work: Path) -> dict[str, Any]:
    arguments, port, health = vhms_arguments(work)
    started = time.perf_counter()
    with command(arguments, code, work) as (process, modules):
        wait_answer(health, process)
        answered, cpu = time.perf_counter() - started, cpu_seconds(process.pid)
        fill(port)
        rss = rss_mib(process.pid)
    return {"first": answered, "first_cpu": cpu, "rss": rss, "unneeded": unneeded(modules)}


def run_api(code: Path | None, work: Path, vhms_port: int) -> dict[str, Any]:
    port = free_port()
    arguments = ["api", f"--vhms=127.0.0.1:{vhms_port}", f"--port={port}"]
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    with command(arguments, code, work) as (process, modules):
        wait_answer(f"{url}/api/v1/labels", process)
        answered, cpu = time.perf_counter() - started, cpu_seconds(process.pid)
        dsl = {"query": 'fetch("bench_requests_total", last=10m) | reduce(sum, by=[rack])'}
        httpx.post(f"{url}/api/v1/query", json=dsl, timeout=60).raise_for_status()
        promql = {"query": "sum by (rack) (bench_requests_total)"}
        httpx.get(f"{url}/prometheus/api/v1/query", params=promql, timeout=60).raise_for_status()
        rss = rss_mib(process.pid)
    return {"first": answered, "first_cpu": cpu, "rss": rss, "unneeded": unneeded(modules)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per case (default 7)")
    parser.add_argument("--baseline", type=Path, help="another checkout's code, run beside this one's")
    args = parser.parse_args()
    codes: dict[str, Path | None] = {"this": None, **({"baseline": args.baseline} if args.baseline else {})}
    work = Path(tempfile.mkdtemp(prefix="startup-bench-"))
    arguments, vhms_port, health = vhms_arguments(work)
    with command(arguments, None, work) as (shard, _):
        wait_answer(health, shard)
        fill(vhms_port)
        cases: dict[str, Callable[[Path | None], dict[str, Any]]] = {
            "python -c pass": lambda code: imports(None, code),
            "artimon vhms": lambda code: imports("artimon.commands.vhms", code) | run_vhms(code, work),
            "artimon api": lambda code: (
                imports("artimon.commands.api", code) | run_api(code, work, vhms_port)
            ),
        }
        measured: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for _ in range(args.runs):  # interleaved: a load that comes and goes touches every case alike
            for name, case in cases.items():
                for side, code in codes.items():
                    measured.setdefault((name, side), []).append(case(code))
    load = os.getloadavg()[0]
    rows = []
    for (name, side), runs in measured.items():
        row: dict[str, Any] = {"case": name, "code": side, "load": round(load, 1)}
        for field in ("import", "import_cpu", "first", "first_cpu", "rss"):
            if field in runs[0]:
                row[f"{field}_{'mib' if field == 'rss' else 's'}"] = statistics.median(r[field] for r in runs)
        row["unneeded"] = runs[-1].get("unneeded")
        rows.append(row)
    columns = [
        "case",
        "code",
        "import_s",
        "import_cpu_s",
        "first_s",
        "first_cpu_s",
        "rss_mib",
        "unneeded",
        "load",
    ]
    report("startup_bench", rows, columns)


if __name__ == "__main__":
    main()
