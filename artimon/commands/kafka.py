"""Run an Apache Kafka cluster in KRaft mode (no ZooKeeper) from Apache's own jars (resolved
once with Maven into the jar cache), on 127.0.0.1, until Ctrl-C. --brokers 3 runs three
nodes with a quorum of three controllers, replication 3 and min.insync.replicas 2. With
$ARTIMON_ZK set it registers there for ``artimon status`` (``/services/kafka``)."""

from __future__ import annotations

import argparse
import sys

from artimon.commands._signals import serve_until_stopped
from artimon.servers import KafkaCluster
from artimon.status import launcher_service
from bookkeeper.zk import Registration


def run(args: argparse.Namespace) -> int:
    if args.brokers < 1:
        print(f"artimon kafka: --brokers {args.brokers} must be at least 1", file=sys.stderr)
        return 2
    try:
        cluster = KafkaCluster(args.data_dir, args.brokers, args.port, heap=args.heap)
    except ValueError as exc:  # cluster.json of another shape in --data-dir
        print(f"artimon kafka: {exc}", file=sys.stderr)
        return 2

    def ready() -> str:
        pids = ", ".join(str(cluster.pid(i)) for i in range(cluster.brokers))
        return (
            f"Kafka ready on {cluster.bootstrap_servers} in {cluster.started_in_s:.1f} s (pids {pids}, "
            f"data in {args.data_dir}); agents name it in kafka.bootstrap.servers. Ctrl-C stops it."
        )

    def register() -> Registration | None:
        return launcher_service("kafka", f"kafka://{cluster.bootstrap_servers}", cluster.brokers)

    return serve_until_stopped(cluster, "kafka", "Kafka", ready, args.data_dir, register)
