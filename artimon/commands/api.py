"""Serve the HTTP query API and the dashboard page over every VHMS shard registered in
ZooKeeper (--zk, else $ARTIMON_ZK) or listed with --vhms host:port, until Ctrl-C."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from artimon.commands._signals import stop_event
from bookkeeper.wire import BackgroundServer
from query_dsl import Limits, ShardedSource, create_app


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="bind address")
    parser.add_argument("--port", type=int, default=8080, help="HTTP port (0: any free one)")
    parser.add_argument("--zk", default=None, help="ZooKeeper connect string[/root] (default $ARTIMON_ZK)")
    parser.add_argument(
        "--vhms", action="append", default=[], help="host:port of a shard (instead of ZooKeeper)"
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("ARTIMON_API_TOKEN"),
        help="require this bearer token (default $ARTIMON_API_TOKEN; none: open)",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds a query may run")
    parser.add_argument(
        "--dashboards",
        type=Path,
        default=None,
        metavar="DIR",
        help="directory of saved dashboards (<name>.json each; see docs/dashboards.md)",
    )


def run(args: argparse.Namespace) -> int:
    if args.dashboards is not None and not args.dashboards.is_dir():
        print(f"artimon api: --dashboards {args.dashboards} is not a directory", file=sys.stderr)
        return 2
    servers = [(h, int(p)) for h, _, p in (s.rpartition(":") for s in args.vhms)] or None
    source = ShardedSource(args.zk, servers)
    server = BackgroundServer(
        create_app(
            source, token=args.token, limits=Limits(timeout_s=args.timeout), dashboards_dir=args.dashboards
        ),
        args.host,
        args.port,
        name="query-api",
    )
    stop = stop_event()
    server.start()
    print(
        f"query API on {server.url} (dashboards at {server.url}/, OpenAPI at {server.url}/openapi.json). "
        "Ctrl-C stops it.",
        flush=True,
    )
    try:
        stop.wait()
    finally:
        server.stop()
        source.close()
    return 0
