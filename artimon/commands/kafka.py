"""Run an Apache Kafka cluster in KRaft mode (no ZooKeeper) from Apache's own jars (resolved
once with Maven into the jar cache), on 127.0.0.1, until Ctrl-C. --brokers 3 runs three
nodes with a quorum of three controllers, replication 3 and min.insync.replicas 2."""

from __future__ import annotations

import argparse
import sys

from artimon.commands._signals import stop_event
from artimon.servers import KafkaCluster
from bookkeeper import DirectoryInUseError


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
