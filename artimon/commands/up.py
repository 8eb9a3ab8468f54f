"""Run the embedded stack on this machine, with all data under --data-dir.

It starts ZooKeeper (unless $ARTIMON_ZK is set), a VHMS shard, an agent whose artimon
source polls every registered bookkeeper each --interval into two file channels, one
drained by the vhms sink and one by the raw sink (landing files), Spark's raw_ingest in
local mode turning the landing files into Parquet history, and the HTTP query API over the
store with the dashboard page (saved dashboards in <data-dir>/dashboards); with --demo,
demo applications register too, and the demo dashboard is saved there. It prints a line
per component as it becomes ready, then a line per round. Ctrl-C stops everything cleanly: the API, the agent
(its channels closed, its last landing file rolled), Spark (after bringing the history up to
date), VHMS (a last snapshot written), then ZooKeeper.

--data-dir serves one ``artimon up`` at a time (``in_use.lock``): a second one on it exits
with status 1, naming the PID of the first. Nothing it starts outlives it, even after a
``kill -9``: ZooKeeper's JVM dies with it (``bookkeeper.process.spawn``), and Spark's JVM
exits when its standard input, a pipe from this process, closes (pyspark's launcher).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from artimon.commands._history import HistoryJob
from artimon.commands._signals import stop_event
from bookkeeper import DirectoryInUseError
from bookkeeper.process import DirectoryLock
from bookkeeper.testing import DemoApps, ZooKeeperServer
from bookkeeper.wire import BackgroundServer
from collector_agent import Agent, MonitorServer
from query_dsl import EXAMPLES, StoreSource, create_app
from vhms import DataDirInUseError, Store, VhmsService

AGENT = """
up.sources = poll
up.channels = durable landing
up.sinks = store land
up.sources.poll.type = artimon
up.sources.poll.zk = {zk}
up.sources.poll.interval = {interval}
up.sources.poll.agentId = embedded
up.sources.poll.channels = durable landing
up.channels.durable.type = file
up.channels.durable.dataDirs = {data}/channels/durable
up.channels.durable.minimumRequiredSpace = 104857600
up.channels.durable.deadLetter.dir = {data}/dead-letter
up.channels.landing.type = file
up.channels.landing.dataDirs = {data}/channels/landing
up.channels.landing.minimumRequiredSpace = 104857600
up.channels.landing.deadLetter.dir = {data}/dead-letter
up.sinks.store.type = vhms
up.sinks.store.channel = durable
up.sinks.store.zk = {zk}
up.sinks.store.maxBackoffSleep = 1000
up.sinks.store.deadLetter.dir = {data}/dead-letter
up.sinks.land.type = raw
up.sinks.land.channel = landing
up.sinks.land.directory = {data}/landing
up.sinks.land.rollInterval = {roll}
up.sinks.land.deadLetter.dir = {data}/dead-letter
"""


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
    parser.add_argument("--api-port", type=int, default=8080, help="query API port (0: any free one)")
    parser.add_argument("--no-spark", action="store_true", help="no Spark raw_ingest (no Parquet history)")


def run(args: argparse.Namespace) -> int:
    data = args.data_dir.resolve()
    try:
        with DirectoryLock(data, "artimon up"):
            return _run(args, data)
    except (DirectoryInUseError, DataDirInUseError) as exc:
        print(f"artimon up: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, data: Path) -> int:
    interval = args.interval or (5.0 if args.demo else 60.0)
    stop = stop_event()
    zk_server = None
    vhms = agent = monitor = demo = api = None
    history: HistoryJob | None = None
    try:
        if not os.environ.get("ARTIMON_ZK"):
            zk_server = ZooKeeperServer(data / "zookeeper", 0)
            zk_server.start()
            print(f"[ready] zookeeper  {zk_server.hosts} (pid {zk_server.pid})", flush=True)
        zk_hosts = zk_server.hosts if zk_server else os.environ["ARTIMON_ZK"]
        vhms = VhmsService(
            Store(), shard="default", snapshot_dir=data / "vhms" / "default", snapshot_every=300
        )
        vhms.start(zk_hosts)
        http = vhms.http.url if vhms.http else "-"
        print(
            f"[ready] vhms       {vhms.host}:{vhms.port}, {http}/stats, {vhms.store.series} series restored",
            flush=True,
        )
        if args.demo:
            demo = DemoApps(zk_hosts)
            demo.start()
            print(f"[ready] demo apps  {len(demo.bookkeepers)} contexts serving", flush=True)
        dashboards = data / "dashboards"
        dashboards.mkdir(parents=True, exist_ok=True)
        if args.demo and not (dashboards / "demo.json").exists():
            shutil.copy(EXAMPLES / "demo.json", dashboards / "demo.json")
        api = BackgroundServer(
            create_app(StoreSource(vhms.store), dashboards_dir=dashboards),
            "127.0.0.1",
            args.api_port,
            name="query-api",
        )
        api.start()
        print(
            f"[ready] query api  {api.url}/api/v1/query (try: artimon query --url {api.url} "
            "'fetch(\"http.requests\", last=10m) | map(rate, 1m) | reduce(sum, by=[method])')",
            flush=True,
        )
        page = f"{api.url}/?d=demo" if args.demo else f"{api.url}/"
        print(f"[ready] dashboard  {page} (saved dashboards in {dashboards})", flush=True)
        if not args.no_spark:
            history = HistoryJob(
                data,
                interval="10 seconds" if args.demo else "5 minutes",
                on_ready=lambda where: print(f"[ready] spark      raw_ingest {where}", flush=True),
            )
            history.start()
        roll = max(5, int(interval * 2))
        agent = Agent.from_properties(
            AGENT.format(zk=zk_hosts, interval=interval, data=data, roll=roll), "up", {}
        )
        agent.start()
        monitor = MonitorServer(agent.metrics, "up", "127.0.0.1", 0)
        monitor.start()
        print(
            f"[ready] agent      every {interval:g} s, metrics on http://127.0.0.1:{monitor.port}/metrics; "
            "Ctrl-C stops everything",
            flush=True,
        )
        rounds = 0
        before = agent.metrics()
        interval_ms = int(interval * 1000)
        while True:
            next_report = (int(time.time() * 1000) // interval_ms + 1) * interval_ms + interval_ms * 0.8
            if stop.wait(max(0.0, next_report / 1000 - time.time())):
                break
            now = agent.metrics()
            source, sink = now["SOURCE.poll"], now["SINK.store"]
            polled = source["PollSuccessCount"] - before["SOURCE.poll"]["PollSuccessCount"]
            failed = source["PollFailCount"] - before["SOURCE.poll"]["PollFailCount"]
            stored = sink["SamplesStoredCount"] - before["SINK.store"]["SamplesStoredCount"]
            print(
                f"round {time.strftime('%H:%M:%S')}: {int(polled)} endpoints polled, {int(failed)} failed, "
                f"{int(stored)} samples stored, {vhms.store.series} series in VHMS, "
                f"{int(now['CHANNEL.durable']['ChannelSize'])} events waiting",
                flush=True,
            )
            before = now
            rounds += 1
            if args.rounds and rounds >= args.rounds:
                break
    finally:
        for component in (api, monitor, agent, demo):
            if component is not None:
                component.stop()
        if history is not None:
            print(history.stop(), flush=True)
        for service in (vhms, zk_server):
            if service is not None:
                service.stop()
        print("stopped.", flush=True)
    return 0
