"""Run a VHMS shard: the in-memory multi-resolution store behind Thrift and HTTP, registered
in ZooKeeper (--zk, else $ARTIMON_ZK), snapshotted into --data-dir with every acknowledged
ingest in a write-ahead log beside the snapshot (unless --no-wal); until Ctrl-C, when it
writes a last snapshot."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TypedDict

from artimon.commands._signals import stop_event
from vhms import DEFAULT_RESOLUTIONS, FSYNC_POLICIES, Store, VhmsError, VhmsService


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shard", default="default", help="shard name (default: default)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=0, help="Thrift port (0: any free one)")
    parser.add_argument("--http-port", type=int, default=0, help="HTTP health/stats port (0: any free one)")
    parser.add_argument("--data-dir", type=Path, default=Path("artimon-data/vhms"), help="snapshot directory")
    parser.add_argument("--snapshot-every", type=float, default=300.0, help="seconds between snapshots")
    add_wal_arguments(parser)
    parser.add_argument("--resolutions", default=DEFAULT_RESOLUTIONS, help=f"default {DEFAULT_RESOLUTIONS}")
    parser.add_argument("--max-series", type=int, default=2_000_000)
    parser.add_argument("--zk", default=None, help="ZooKeeper connect string[/root] (default $ARTIMON_ZK)")
    parser.add_argument("--no-register", action="store_true", help="do not register in ZooKeeper")


def add_wal_arguments(parser: argparse.ArgumentParser) -> None:
    """The write-ahead log's flags (``artimon vhms`` and ``artimon up`` share them)."""
    parser.add_argument(
        "--no-wal",
        action="store_true",
        help="no write-ahead log: a crash loses what came since the last snapshot",
    )
    parser.add_argument(
        "--wal-fsync",
        choices=FSYNC_POLICIES,
        default="always",
        help="always: an ingest is answered once fsynced (survives a power loss; default); "
        "periodic: once written, fsynced every --wal-fsync-period (survives a crash of the process)",
    )
    parser.add_argument(
        "--wal-fsync-period", type=float, default=1.0, help="seconds between fsyncs with periodic (1)"
    )


class WalOptions(TypedDict):
    wal: bool
    wal_fsync: str
    wal_fsync_period: float


def wal_options(args: argparse.Namespace) -> WalOptions:
    """``VhmsService`` keyword arguments from :func:`add_wal_arguments`' flags."""
    return {"wal": not args.no_wal, "wal_fsync": args.wal_fsync, "wal_fsync_period": args.wal_fsync_period}


def run(args: argparse.Namespace) -> int:
    try:
        store = Store(args.resolutions, max_series=args.max_series)
    except VhmsError as exc:
        print(f"artimon vhms: {exc}", file=sys.stderr)
        return 2
    stop = stop_event()
    service = VhmsService(
        store,
        shard=args.shard,
        host=args.host,
        port=args.port,
        http_port=args.http_port,
        snapshot_dir=args.data_dir / args.shard,
        snapshot_every=args.snapshot_every,
        **wal_options(args),
    )
    service.start(args.zk, register=not args.no_register)
    http = f", HTTP on {service.http.url}" if service.http else ""
    replayed = service.replayed.records if service.replayed else 0
    print(
        f"vhms shard {args.shard} serving {store.series} series on {service.host}:{service.port}{http} "
        f"({replayed} write-ahead log records replayed). Ctrl-C stops it.",
        flush=True,
    )
    try:
        stop.wait()
    finally:
        service.stop()
    print(f"vhms shard {args.shard} stopped; snapshot in {args.data_dir / args.shard}.", flush=True)
    return 0
