"""Run a site of many hosts on this machine (root only): ``up`` makes --hosts network
namespaces on one bridge with no uplink (addresses 198.18.0.1 and on; this machine is
198.18.0.254 on the bridge), with --zookeeper a ZooKeeper ensemble of 3 on h1-h3, with
--topology full the grown-up topology on 8 hosts or more (docs/operations.md §2.8), and runs
until Ctrl-C or SIGTERM, then removes them all; ``down`` stops a site that is up (SIGTERM
to its owner) and removes what a crashed one left."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from artimon.commands._signals import stop_event
from artimon.site import (
    HISTORY_ROOT,
    MIN_HOSTS,
    STATE_DIR,
    Layout,
    Site,
    SiteError,
    Topology,
    clean_leftovers,
    live_sites,
    unavailable_reason,
)
from artimon.stack import KAFKA_TOPIC

DOWN_TIMEOUT_S = 60.0


def _up(args: argparse.Namespace) -> int:
    if args.zookeeper and args.hosts < 3:
        print("artimon site: --zookeeper needs --hosts 3 or more", file=sys.stderr)
        return 2
    if args.topology and (args.zookeeper or args.hosts < MIN_HOSTS):
        print(
            f"artimon site: --topology needs --hosts {MIN_HOSTS} or more (and runs its own ZooKeeper)",
            file=sys.stderr,
        )
        return 2
    stop = stop_event()
    site = Site(args.hosts, args.data_dir)
    try:
        site.start()
        for host in site.hosts:
            print(f"{host.name}  {host.address:<13}  ip netns exec {host.namespace} COMMAND", flush=True)
        if args.zookeeper:
            ensemble = site.zookeeper_ensemble(["h1", "h2", "h3"])
            print(f"ZooKeeper ensemble ready: export ARTIMON_ZK={ensemble.hosts}", flush=True)
        if args.topology:
            _print_topology(Topology(site, Layout.of(args.hosts), interval=args.interval).start())
        print(f"site {site.network.prefix} is up. Ctrl-C (or artimon site down) removes it.", flush=True)
        while not stop.wait(1.0):
            if exited := site.exited():
                print(f"{', '.join(exited)} exited unexpectedly; see its log in {args.data_dir}", flush=True)
                return 1
    except (SiteError, RuntimeError, ValueError) as exc:
        print(f"artimon site: {exc}", file=sys.stderr)
        return 1
    finally:
        site.stop()
    print(f"site {site.network.prefix} removed.", flush=True)
    return 0


def _print_topology(topology: Topology) -> None:
    """Where each part of the topology serves, a line each."""
    lines = [
        f"ZooKeeper    export ARTIMON_ZK={topology.zk}",
        f"Kafka        {topology.kafka.bootstrap_servers} (topic {KAFKA_TOPIC})",
        f"HDFS         {topology.hdfs.uri} ({topology.hdfs.datanodes} DataNodes, {topology.hdfs.webhdfs})",
        f"Spark        {topology.spark.master_url} (master UI {topology.spark.web_url})",
        f"history      raw_ingest --kafka -> {topology.hdfs.uri}{HISTORY_ROOT}/parquet"
        f" (its driver's /metrics: http://{topology.history.address}:{topology.history.metrics_port}/metrics)",
        *(f"VHMS {m.shard}      {m.address}:{m.port} ({m.http_url}/stats)" for m in topology.vhms),
        *(f"query API    {api.url}/" for api in topology.apis),
        *(f"store agent  {agent.monitor_url}/metrics" for agent in topology.store_agents),
        *(f"poll agent   {agent.monitor_url}/metrics" for agent in topology.polling_agents.values()),
    ]
    for line in lines:
        print(line, flush=True)


def _down() -> int:
    for record in live_sites(STATE_DIR):
        os.kill(record.pid, signal.SIGTERM)
        deadline = time.monotonic() + DOWN_TIMEOUT_S
        while record.path.exists() and record.alive:
            if time.monotonic() > deadline:
                print(f"artimon site: site {record.prefix} (PID {record.pid}) is still up", file=sys.stderr)
                return 1
            time.sleep(0.1)  # waiting on another process's exit: no event to wait on
        print(f"site {record.prefix} of PID {record.pid} stopped.", flush=True)
    for prefix in clean_leftovers(STATE_DIR):
        print(f"removed the leftovers of site {prefix}.", flush=True)
    return 0


def run(args: argparse.Namespace) -> int:
    reason = unavailable_reason()
    if reason is not None:
        print(f"artimon site: {reason}", file=sys.stderr)
        return 1
    return _up(args) if args.action == "up" else _down()
