"""Show the site in one screen: ZooKeeper's members and their leader (each asked ``srvr``),
the agent groups and who owns which endpoint, each agent's last round and lag, each VHMS
shard's replicas, their series and whether they agree, the query APIs, Kafka, the Spark
master and HDFS (each asked its ``/health``, ``/stats``, ``/json/`` or metadata), then what
is degraded and why. Every probe has --timeout and they run at once, so it answers in
about a second even with hosts down. Exit status 0 when healthy, 1 when degraded. --json
prints the same view as one JSON object (docs/operations.md draws its schema)."""

from __future__ import annotations

import argparse
import json
import sys

from artimon.status import collect, render_text


def run(args: argparse.Namespace) -> int:
    if not 0 < args.timeout <= 60:
        print(f"artimon status: --timeout {args.timeout} is not between 0 and 60 seconds", file=sys.stderr)
        return 2
    try:
        status = collect(args.zk, timeout=args.timeout)
    except ValueError as exc:  # a connect string without a host
        print(f"artimon status: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(status.to_json(), indent=1))
    else:
        print(render_text(status), end="")
    return 0 if status.healthy else 1
