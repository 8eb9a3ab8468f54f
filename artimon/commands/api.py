"""Serve the HTTP query API and the dashboard page over every VHMS shard registered in
ZooKeeper (--zk, else $ARTIMON_ZK) or listed with --vhms host:port, until Ctrl-C. With
--vhms-ca the shards are spoken to over TLS (--vhms-cert and --vhms-key: the client
certificate a shard with --tls-client-ca asks for)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from artimon.commands._signals import stop_event
from bookkeeper import TlsConfigError
from bookkeeper.ground import BackgroundServer
from bookkeeper.wire import client_context
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
    tls = parser.add_argument_group("TLS to the VHMS shards")
    tls.add_argument("--vhms-ca", type=Path, help="PEM CA that signed the shards' certificates: turns TLS on")
    tls.add_argument("--vhms-cert", type=Path, help="PEM client certificate (with its key unless --vhms-key)")
    tls.add_argument("--vhms-key", type=Path, help="PEM private key of --vhms-cert")
    tls.add_argument(
        "--vhms-no-check-hostname",
        action="store_true",
        help="do not require the shards' certificates to name the address they register",
    )


def run(args: argparse.Namespace) -> int:
    if args.dashboards is not None and not args.dashboards.is_dir():
        print(f"artimon api: --dashboards {args.dashboards} is not a directory", file=sys.stderr)
        return 2
    ssl_context = None
    if args.vhms_ca is not None:
        try:
            ssl_context = client_context(
                args.vhms_ca,
                certfile=args.vhms_cert,
                keyfile=args.vhms_key,
                check_hostname=not args.vhms_no_check_hostname,
            )
        except TlsConfigError as exc:
            print(f"artimon api: {exc}", file=sys.stderr)
            return 2
    elif args.vhms_cert is not None or args.vhms_key is not None:
        print("artimon api: --vhms-cert and --vhms-key need --vhms-ca", file=sys.stderr)
        return 2
    servers = [(h, int(p)) for h, _, p in (s.rpartition(":") for s in args.vhms)] or None
    source = ShardedSource(args.zk, servers, ssl_context=ssl_context)
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
