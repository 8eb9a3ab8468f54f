"""One round of the ``prometheus`` source scraping N targets x M series beside one round of
the ``artimon`` source polling the same number of samples from bookkeeper endpoints, in one
run (a ratio, fair on a loaded machine); and a histogram ``observe`` against
prometheus_client's. Prints a table, writes results/scrape_bench.json.

Each side: one agent, its source, a memory channel, a null sink; the time from the round's
start to the round's last event accepted by the channel, and the agent's CPU seconds. The
targets are served by separate processes (``--per-process`` each, raw asyncio HTTP/1.1
with keep-alive, each answer a pre-rendered body of the text format whose values change
from one scrape to the next); the endpoints by ``bookkeeper.testing`` apps, as
``poll_bench.py`` serves them.

Targets (issue 20): 1,000 targets x 1,000 series in a round within 2x the artimon source's
time for the same samples; ``observe`` at most prometheus_client's (ratio <= 1).

Run: python benchmarks/scrape_bench.py [--quick] [--targets 1000] [--series 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

from _report import progress, report

from artimon.servers import ZooKeeperServer
from artimon.stack import agent_properties
from bookkeeper import Bookkeeper
from bookkeeper.testing import start_app
from collector_agent import Agent

# -- the exporters ---------------------------------------------------------------------------


def _bodies(series: int) -> list[bytes]:
    """Two bodies of one shape, other values: counters, a gauge, histograms (text format)."""
    bodies = []
    for variant in range(2):
        lines = []
        for i in range(series):
            family = f"bench_family_{i // 50}"
            if i % 50 == 0:
                lines.append(
                    f"# HELP {family}_total A counter of the benchmark.\n# TYPE {family}_total counter\n"
                )
            lines.append(
                f'{family}_total{{path="/api/v{i % 7}/item{i}",code="{200 + i % 3}"}} {i * 17 + variant}\n'
            )
        bodies.append("".join(lines).encode())
    return bodies


def serve(count: int, series: int) -> None:
    """``count`` exporters in this process; prints their ports, serves until stdin closes."""
    bodies = _bodies(series)
    heads = [
        f"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
        for body in bodies
    ]
    turn = [0]

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                turn[0] += 1
                writer.write(heads[turn[0] % 2])
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        servers = [await asyncio.start_server(answer, "127.0.0.1", 0, backlog=256) for _ in range(count)]
        print(" ".join(str(s.sockets[0].getsockname()[1]) for s in servers), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    asyncio.run(main())


# -- one round of a source -------------------------------------------------------------------


def measure_rounds(agent: Agent, events: int, interval: int, rounds: int, label: str) -> list[dict[str, Any]]:
    source = agent.sources["src"]
    rows = []
    accepted = int(source.metrics()["EventAcceptedCount"])
    for n in range(rounds):
        round_start = (time.time() // interval + 1) * interval
        while time.time() < round_start:
            time.sleep(0.02)
        cpu_before = resource.getrusage(resource.RUSAGE_SELF)
        target = accepted + events
        while source.metrics()["EventAcceptedCount"] < target and time.time() < round_start + interval:
            time.sleep(0.005)
        done = time.time()
        cpu_after = resource.getrusage(resource.RUSAGE_SELF)
        accepted = int(source.metrics()["EventAcceptedCount"])
        cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
        progress(f"{label} round {n + 1}: {done - round_start:.2f} s, cpu {cpu:.2f} s")
        rows.append({"case": f"{label}, round {n + 1}", "seconds": done - round_start, "cpu_seconds": cpu})
    return rows


def run_rounds(
    args: argparse.Namespace, source_type: str, keys: dict[str, object], events: int
) -> list[dict[str, Any]]:
    """An agent with a source of ``source_type``, measured for ``args.rounds`` rounds."""
    source = {
        "type": source_type,
        "interval": args.interval,
        "threads": args.threads,
        "batchSize": 100,
        "channels": "mem",
        **keys,
    }
    config = agent_properties(
        "b",
        sources={"src": source},
        channels={"mem": {"type": "memory", "capacity": 20000, "transactionCapacity": 1000}},
        sinks={"drain": {"type": "null", "channel": "mem", "batchSize": 100}},
    )
    agent = Agent.from_properties(config, "b", {})
    agent.start()
    try:
        rows = measure_rounds(agent, events, args.interval, args.rounds, f"{source_type} source")
        metrics = agent.sources["src"].metrics()
        failed = sum(metrics.get(k, 0) for k in ("ScrapeFailCount", "PollFailCount", "PollTimeoutCount"))
        progress(f"{source_type} source: {failed} failed scrapes or polls")
    finally:
        agent.stop()
    return rows


def scrape_side(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    servers = []
    ports: list[str] = []
    try:
        for first in range(0, args.targets, args.per_process):
            count = min(args.per_process, args.targets - first)
            server = subprocess.Popen(
                [sys.executable, __file__, "--serve", str(count), "--series", str(args.series)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            servers.append(server)
            assert server.stdout is not None
            ports.extend(server.stdout.readline().split())
        progress(f"{len(ports)} exporters serving")
        targets = " ".join(f"127.0.0.1:{port}" for port in ports)
        keys = {"targets": targets, "scrapeTimeout": args.interval * 0.9}
        return run_rounds(args, "prometheus", keys, len(ports))
    finally:
        for server in servers:
            if server.stdin is not None:
                server.stdin.close()
            server.kill()
            server.wait()


def artimon_side(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    zk = ZooKeeperServer(work / "zk", tick_time_ms=500).start()
    apps = []
    try:
        for first in range(0, args.targets, args.per_process):
            count = min(args.per_process, args.targets - first)
            apps.append(
                start_app(f"app{first}", zk.hosts, variables=args.series, endpoints=count, timeout=600)
            )
        progress(f"{args.targets} bookkeeper endpoints serving")
        keys = {"zk": zk.hosts, "catchup": 0, "readTimeout": 20}
        return run_rounds(args, "artimon", keys, args.targets)
    finally:
        for app in apps:
            app.kill()
        zk.stop()


# -- histograms ------------------------------------------------------------------------------


def observe_rows(repeat: int) -> list[dict[str, Any]]:
    from prometheus_client import CollectorRegistry
    from prometheus_client import Histogram as ClientHistogram

    ours = Bookkeeper("bench", environ={}).histogram("latency_seconds", method="get")
    theirs = ClientHistogram("latency_seconds", "x", ["method"], registry=CollectorRegistry()).labels("get")
    values = [0.003, 0.07, 0.4, 3.0, 42.0]
    best: dict[str, float] = {}
    for _ in range(5):  # interleaved, best of five: the same load for both
        for name, observe in (("ours", ours.observe), ("theirs", theirs.observe)):
            seconds = timeit.timeit(lambda observe=observe: [observe(v) for v in values], number=repeat)
            best[name] = min(best.get(name, 1e9), seconds / (repeat * len(values)) * 1e9)
    return [
        {
            "case": "histogram observe, cached handle (ns)",
            "artimon": best["ours"],
            "prometheus_client": best["theirs"],
            "ratio": best["ours"] / best["theirs"],
            "target": "<= 1",
            "met": best["ours"] <= best["theirs"],
        }
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100 targets")
    parser.add_argument("--targets", type=int, default=None)
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--per-process", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--interval", type=int, default=20)
    parser.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.series)
        return
    args.targets = args.targets or (100 if args.quick else 1000)
    work = Path(tempfile.mkdtemp(prefix="scrape-bench-"))
    samples = args.targets * args.series
    scraped = scrape_side(args, work)
    polled = artimon_side(args, work)
    rows: list[dict[str, Any]] = []
    for ours, theirs in zip(scraped, polled, strict=True):
        rows.append({**ours, "samples": samples, "samples/s": samples / ours["seconds"]})
        rows.append({**theirs, "samples": samples, "samples/s": samples / theirs["seconds"]})
    steady = min(r["seconds"] for r in scraped[1:] or scraped)
    base = min(r["seconds"] for r in polled[1:] or polled)
    rows.append(
        {
            "case": f"ratio, steady rounds (best), {args.targets} x {args.series}",
            "seconds": steady / base,
            "target": "<= 2",
            "met": steady / base <= 2,
        }
    )
    report(
        "scrape_bench",
        rows,
        ["case", "seconds", "cpu_seconds", "samples", "samples/s", "target", "met"],
    )
    report(
        "scrape_bench_observe",
        observe_rows(20_000),
        ["case", "artimon", "prometheus_client", "ratio", "target", "met"],
    )


if __name__ == "__main__":
    main()
