"""Run an Apache Kafka cluster in KRaft mode (no ZooKeeper) from Apache's own jars (resolved
once with Maven into the jar cache), on 127.0.0.1, until Ctrl-C. --brokers 3 runs three
nodes with a quorum of three controllers, replication 3 and min.insync.replicas 2."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from artimon.commands._signals import stop_event
from bookkeeper import DirectoryInUseError
from bookkeeper.testing import KafkaCluster


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        type=int,
        default=9092,
        help="first broker's port; broker n listens on port+n-1 (default 9092; 0 picks free ports)",
    )
    parser.add_argument("--brokers", type=int, default=1, help="nodes, each broker and controller (1 or 3)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("artimon-data/kafka"),
        help="where the nodes keep their logs (default ./artimon-data/kafka)",
    )
    parser.add_argument("--heap", default="512m", help="JVM heap of each node (default 512m)")


def run(args: argparse.Namespace) -> int:
    if args.brokers < 1:
        print(f"artimon kafka: --brokers {args.brokers} must be at least 1", file=sys.stderr)
        return 2
    try:
        cluster = KafkaCluster(args.data_dir, args.brokers, args.port, heap=args.heap)
    except ValueError as exc:  # cluster.json of another shape in --data-dir
        print(f"artimon kafka: {exc}", file=sys.stderr)
        return 2
    stop = stop_event()
    try:
        cluster.start()
    except DirectoryInUseError as exc:
        print(f"artimon kafka: {exc}", file=sys.stderr)
        return 1
    pids = ", ".join(str(cluster.pid(i)) for i in range(cluster.brokers))
    print(
        f"Kafka ready on {cluster.bootstrap_servers} in {cluster.start_seconds:.1f} s (pids {pids}, "
        f"data in {args.data_dir}); agents name it in kafka.bootstrap.servers. Ctrl-C stops it.",
        flush=True,
    )
    try:
        while not stop.wait(1.0):
            for index in range(cluster.brokers):
                if cluster.pid(index) is None:
                    print(f"Kafka node {index + 1} exited unexpectedly; see its log in", args.data_dir)
                    return 1
    finally:
        cluster.stop()
    print("Kafka stopped.", flush=True)
    return 0
