"""Run a VHMS shard: the in-memory multi-resolution store behind Thrift and HTTP, registered
in ZooKeeper (--zk, else $ARTIMON_ZK), snapshotted into --data-dir; until Ctrl-C, when it
writes a last snapshot."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from artimon.commands._signals import stop_event
from vhms import DEFAULT_RESOLUTIONS, DataDirInUseError, Store, VhmsError, VhmsService


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shard", default="default", help="shard name (default: default)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=0, help="Thrift port (0: any free one)")
    parser.add_argument("--http-port", type=int, default=0, help="HTTP health/stats port (0: any free one)")
    parser.add_argument("--data-dir", type=Path, default=Path("artimon-data/vhms"), help="snapshot directory")
    parser.add_argument("--snapshot-every", type=float, default=300.0, help="seconds between snapshots")
    parser.add_argument("--resolutions", default=DEFAULT_RESOLUTIONS, help=f"default {DEFAULT_RESOLUTIONS}")
    parser.add_argument("--max-series", type=int, default=2_000_000)
    parser.add_argument("--zk", default=None, help="ZooKeeper connect string[/root] (default $ARTIMON_ZK)")
    parser.add_argument("--no-register", action="store_true", help="do not register in ZooKeeper")


def run(args: argparse.Namespace) -> int:
    try:
        store = Store(args.resolutions, max_series=args.max_series)
    except VhmsError as exc:
        print(f"artimon vhms: {exc}", file=sys.stderr)
        return 2
    stop = stop_event()
    try:
        service = VhmsService(
            store,
            shard=args.shard,
            host=args.host,
            port=args.port,
            http_port=args.http_port,
            snapshot_dir=args.data_dir / args.shard,
            snapshot_every=args.snapshot_every,
        )
    except DataDirInUseError as exc:
        print(f"artimon vhms: {exc}", file=sys.stderr)
        return 1
    service.start(args.zk, register=not args.no_register)
    http = f", HTTP on {service.http.url}" if service.http else ""
    print(
        f"vhms shard {args.shard} serving {store.series} series on {service.host}:{service.port}{http}. "
        "Ctrl-C stops it.",
        flush=True,
    )
    try:
        stop.wait()
    finally:
        service.stop()
    print(f"vhms shard {args.shard} stopped; snapshot in {args.data_dir / args.shard}.", flush=True)
    return 0
