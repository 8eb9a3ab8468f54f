"""The matched division (``app_requests_total / on(dc, host, i, rack) app_requests_total``:
an instant answer of every series, 86 MB of JSON at a million) over HTTP, on this tree's
query API and on another checkout's, at each size, all loaded at once and asked in
interleaved rounds: issue 27's one growth from 100K to 1M series that was worse than the
peers'.

Each (checkout, size) is a query process of its own, served as ``query_bench.py`` serves
Artimon (its ``--serve``: the store in process, the serving processes' allocator settings).
Every round asks each of them in turn, ``--pause`` seconds after the previous request (the
pause the peers' turns give each server in ``query_bench.py``: long enough for the budget's
memory return), the body read inside the timed interval; then as many rounds back to back.
Per process: the median and best wall time, its CPU time and minor page faults per query
(``/proc``), its resident memory after the rounds, and the answer's SHA-256 (the bytes must
be the same on every side). No peers are started.

    PYTHONPATH=. python benchmarks/division_http_bench.py --baseline ../main [--sizes 100000,1000000]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from _query_cases import cases
from _query_data import MINUTE, Data
from _query_servers import free_port, wait_http, wait_settled
from _report import cpu_seconds, progress, rss_mib

HERE = Path(__file__).resolve().parent


def minor_faults(pid: int) -> int:
    """Minor page faults of process ``pid`` (every thread), from /proc."""
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[7])


class Side:
    """One checkout's query process at one size."""

    def __init__(self, checkout: Path, data: Data) -> None:
        self.name = f"{checkout.name} {data.count:,}"
        self.port = free_port()
        command = [sys.executable, str(HERE / "query_bench.py"), f"--serve={self.port}"]
        command += [f"--series={data.count}", f"--minutes={data.minutes}", f"--end={data.end}"]
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        self.case = next(case for case in cases(data) if case.name == "matched division")
        self.paused: list[float] = []
        self.back_to_back: list[float] = []
        self.cpu_ms: list[float] = []
        self.faults: list[int] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/prometheus/api/v1/{self.case.endpoint}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def ask(self, client: httpx.Client) -> tuple[float, bytes]:
        """One request, to its body read in full: ms and the body."""
        gc.disable()  # a collection set off by this client's heap is noise
        try:
            started = time.perf_counter()
            response = client.get(self.url, params=self.case.params)
            spent = (time.perf_counter() - started) * 1000
        finally:
            gc.enable()
        response.raise_for_status()
        return spent, response.content

    def measured(self, client: httpx.Client) -> None:
        """One paused request, with the process's CPU and faults over it."""
        pid = self.process.pid
        cpu, faults = cpu_seconds(pid), minor_faults(pid)
        spent, _ = self.ask(client)
        self.paused.append(spent)
        self.cpu_ms.append((cpu_seconds(pid) - cpu) * 1000)
        self.faults.append(minor_faults(pid) - faults)


def run(sides: list[Side], repeat: int, pause: float) -> None:
    with httpx.Client(timeout=1800) as client:
        for side in sides:
            wait_http(
                side.url.rsplit("/", 1)[0] + "/labels",
                timeout=3600,
                alive=side.alive,
            )
        wait_settled({side.name: side.process.pid for side in sides})
        digests = {}
        for side in sides:
            digests[side.name] = hashlib.sha256(side.ask(client)[1]).hexdigest()[:16]
        for _ in range(repeat):
            for side in sides:
                time.sleep(pause)
                side.measured(client)
        for _ in range(repeat):
            for side in sides:
                side.ask(client)  # the one before leaves the allocators as a query leaves them
                side.back_to_back.append(side.ask(client)[0])
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; ms, {repeat} rounds")
    head = [
        "paused median",
        "paused best",
        "CPU a query",
        "faults a query",
        "back to back",
        "RSS MiB",
        "answer",
    ]
    print("| side | " + " | ".join(head) + " |")
    for side in sides:
        cells = [
            f"{statistics.median(side.paused):.1f}",
            f"{min(side.paused):.1f}",
            f"{statistics.median(side.cpu_ms):.0f}",
            f"{statistics.median(side.faults):,.0f}",
            f"{statistics.median(side.back_to_back):.1f}",
            f"{rss_mib(side.process.pid):.0f}",
            digests[side.name],
        ]
        print(f"| {side.name} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--minutes", type=int, default=75)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--pause", type=float, default=1.0, help="seconds before each paused request")
    parser.add_argument("--baseline", type=Path, help="a checkout whose code is measured beside this tree's")
    parser.add_argument("--quick", action="store_true", help="10K and 100K series, 3 rounds")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.repeat = "10000,100000", 3
    end = int(time.time()) * 1000 // MINUTE * MINUTE - MINUTE
    checkouts = ([args.baseline.resolve()] if args.baseline else []) + [HERE.parent]
    sides = []
    try:
        for count in (int(size) for size in args.sizes.split(",")):
            data = Data(count, args.minutes, end)
            sides += [Side(checkout, data) for checkout in checkouts]
        progress(f"{len(sides)} query processes loading")
        run(sides, args.repeat, args.pause)
    finally:
        for side in sides:
            side.process.terminate()
            side.process.wait(60)


if __name__ == "__main__":
    main()
