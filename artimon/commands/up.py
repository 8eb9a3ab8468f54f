"""Run the embedded stack on this machine, with all data under --data-dir.

Today it starts ZooKeeper (unless $ARTIMON_ZK is set) and, with --demo, demo applications
that register through the bookkeeper; every --interval it discovers the registered
endpoints and reads them, printing a line per round. The agent, VHMS, the query API and
Spark join it as they land. Ctrl-C stops everything cleanly.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from artimon.commands._signals import stop_event
from bookkeeper import BookkeeperError, read_endpoint
from bookkeeper.demo import DemoApps
from bookkeeper.discovery import list_endpoints
from bookkeeper.registration import make_client
from bookkeeper.zkserver import ZooKeeperServer
from bookkeeper.znodes import resolve_zk


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--demo", action="store_true", help="add demo applications")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("artimon-data"),
        help="where every component keeps its data (default ./artimon-data)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=None,
        help="seconds between polling rounds (default 60, 5 with --demo)",
    )
    parser.add_argument("--rounds", type=int, default=0, help="stop after N rounds (0: never)")


def run(args: argparse.Namespace) -> int:
    interval = args.interval or (5.0 if args.demo else 60.0)
    stop = stop_event()
    zk_server = None
    if not os.environ.get("ARTIMON_ZK"):
        zk_server = ZooKeeperServer(args.data_dir / "zookeeper", 0)
        zk_server.start()
        print(f"[ready] zookeeper  {zk_server.hosts} (pid {zk_server.pid})", flush=True)
    zk_hosts = zk_server.hosts if zk_server else os.environ["ARTIMON_ZK"]
    demo = None
    client = None
    try:
        if args.demo:
            demo = DemoApps(zk_hosts)
            demo.start()
            print(f"[ready] demo apps  {len(demo.bookkeepers)} contexts serving", flush=True)
        connect, layout = resolve_zk(zk_hosts)
        client = make_client(connect)
        client.start(timeout=30)
        print(f"[ready] poller     every {interval:g} s; Ctrl-C stops everything", flush=True)
        rounds = 0
        while not stop.wait(interval):
            started = time.monotonic()
            endpoints = list_endpoints(client, layout)
            variables = failures = 0
            for info in endpoints:
                try:
                    variables += len(read_endpoint(info.host, info.port, timeout=10))
                except BookkeeperError:
                    failures += 1
            took_ms = (time.monotonic() - started) * 1000
            print(
                f"round {time.strftime('%H:%M:%S')}: {len(endpoints)} endpoints, "
                f"{variables} variables read, {failures} failed, in {took_ms:.0f} ms",
                flush=True,
            )
            rounds += 1
            if args.rounds and rounds >= args.rounds:
                break
    finally:
        if client is not None:
            client.stop()
            client.close()
        if demo is not None:
            demo.stop()
        if zk_server is not None:
            zk_server.stop()
        print("stopped.", flush=True)
    return 0
