"""One agent polls many bookkeeper endpoints served from separate processes into a file
channel: time from the round's start to the last commit, CPU seconds, peak RSS. Prints a
table, writes results/poll_bench.json.

Target (issue 4): 1,000 endpoints x 1,500 variables (Artimon's 1.5M metrics a minute)
committed within 10 s of the round's start on this 2-core machine; moonshot 5 s.

Run: python benchmarks/poll_bench.py [--quick] [--endpoints 1000] [--variables 1500]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from _report import progress, report

from artimon.servers import ZooKeeperServer
from artimon.stack import agent_properties
from bookkeeper.testing import start_app
from collector_agent import Agent


def properties(zk: str, interval: int, threads: int, read_timeout: int, data: Path) -> str:
    """An artimon source polling every endpoint into a file channel in ``data``, drained into nothing."""
    poll = {
        "type": "artimon",
        "zk": zk,
        "interval": interval,
        "threads": threads,
        "readTimeout": read_timeout,
        "catchup": 0,
        "batchSize": 100,
        "channels": "fc",
    }
    channel = {"type": "file", "dataDirs": data, "minimumRequiredSpace": 1048576, "transactionCapacity": 1000}
    return agent_properties(
        "b",
        sources={"poll": poll},
        channels={"fc": channel},
        sinks={"drain": {"type": "null", "channel": "fc", "batchSize": 100}},
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100 endpoints")
    parser.add_argument("--endpoints", type=int, default=None)
    parser.add_argument("--variables", type=int, default=1500)
    parser.add_argument("--per-process", type=int, default=50, help="endpoints served by one process")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    endpoints = args.endpoints or (100 if args.quick else 1000)
    work = Path(tempfile.mkdtemp(prefix="poll-bench-"))
    zk = ZooKeeperServer(work / "zk", tick_time_ms=500).start()
    apps = []
    try:
        started = time.monotonic()
        for first in range(0, endpoints, args.per_process):
            count = min(args.per_process, endpoints - first)
            apps.append(
                start_app(f"app{first}", zk.hosts, variables=args.variables, endpoints=count, timeout=600)
            )
            progress(f"{first + count}/{endpoints} endpoints serving ({time.monotonic() - started:.0f} s)")
        interval = 30
        agent = Agent.from_properties(
            properties(zk.hosts, interval, args.threads, 20, work / "fc"),
            "b",
            {},
        )
        agent.start()
        source = agent.sources["poll"]
        rows = []
        accepted = 0
        for _ in range(args.rounds):
            round_start = (time.time() // interval + 1) * interval
            while time.time() < round_start:
                time.sleep(0.05)
            cpu_before = resource.getrusage(resource.RUSAGE_SELF)
            target = accepted + endpoints
            while source.metrics()["EventAcceptedCount"] < target and time.time() < round_start + interval:
                time.sleep(0.01)
            done = time.time()
            cpu_after = resource.getrusage(resource.RUSAGE_SELF)
            metrics = source.metrics()
            accepted = int(metrics["EventAcceptedCount"])
            cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
            seconds = done - round_start
            polls = int(metrics["PollSuccessCount"])
            progress(f"round: {polls} polls ok, committed in {seconds:.2f} s, cpu {cpu:.2f} s")
            rows.append(
                {
                    "case": f"round of {endpoints} endpoints x {args.variables} variables",
                    "seconds": seconds,
                    "samples": endpoints * args.variables,
                    "samples/s": endpoints * args.variables / seconds,
                    "cpu_seconds": cpu,
                    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                    "target": "<= 10 s (moonshot 5 s)",
                    "met": seconds <= 10,
                }
            )
        failures = source.metrics()["PollFailCount"] + source.metrics()["PollTimeoutCount"]
        agent.stop()
        report(
            "poll_bench",
            rows,
            ["case", "seconds", "samples", "samples/s", "cpu_seconds", "peak_rss_mb", "target", "met"],
        )
        print(f"poll failures: {failures}")
    finally:
        for app in apps:
            app.kill()
        zk.stop()


if __name__ == "__main__":
    main()
