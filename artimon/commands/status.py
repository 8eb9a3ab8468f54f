"""Show the site in one screen: ZooKeeper's members and their leader (each asked ``srvr``),
the agent groups and who owns which endpoint, each agent's last round and lag, each VHMS
shard's replicas, their series and whether they agree, the query APIs, Kafka, the Spark
master and HDFS (each asked its ``/health``, ``/stats``, ``/json/`` or metadata), then what
is degraded and why. Every probe has --timeout and they run at once, so it answers in
about a second even with hosts down. A component known and not registered now (killed, cut
off, or stopped uncleanly) is missing, with its last known address. Exit status 0 when
healthy, 1 when degraded. --json prints the same view as one JSON object (docs/operations.md
draws its schema). --forget ID (or --forget-missing) forgets a component gone for good,
with the credentials of the ZooKeeper tree (artimon --zk-auth-file FILE status --forget ID)."""

from __future__ import annotations

import argparse
import json
import sys

from artimon.status import collect, forget, render_text


def run(args: argparse.Namespace) -> int:
    if not 0 < args.timeout <= 60:
        print(f"artimon status: --timeout {args.timeout} is not between 0 and 60 seconds", file=sys.stderr)
        return 2
    if args.forget or args.forget_missing:
        return _forget(args)
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


def _forget(args: argparse.Namespace) -> int:
    """``--forget``: a line per component; 0 when each was forgotten."""
    try:
        outcomes = forget(args.zk, args.forget, missing=args.forget_missing, timeout=max(args.timeout, 10.0))
    except ValueError as exc:
        print(f"artimon status: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"artimon status: {exc}", file=sys.stderr)
        return 1
    for forgotten, line in outcomes:
        print(line, file=sys.stdout if forgotten else sys.stderr)
    if not outcomes:
        print("nothing missing: nothing forgotten")
    return 0 if all(forgotten for forgotten, _ in outcomes) else 1
