"""Run a VHMS shard: the in-memory multi-resolution store behind Thrift and HTTP, registered
in ZooKeeper (--zk, else $ARTIMON_ZK), snapshotted into --data-dir with every acknowledged
ingest in a write-ahead log beside the snapshot (unless --no-wal); until Ctrl-C, when it
writes a last snapshot. --tls-cert and --tls-key make the Thrift port speak TLS only
(--tls-client-ca: clients must present a certificate it signed); the --max-connections...
--frame-timeout flags are the Thrift server's limits (bookkeeper.wire.ServerLimits)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TypedDict

from artimon.commands._signals import stop_event
from bookkeeper import TlsConfigError
from bookkeeper.wire import server_context
from vhms import DEFAULT_RESOLUTIONS, DataDirInUseError, VhmsError
from vhms.server import DEFAULT_SERVER_LIMITS, FSYNC_POLICIES, Store, VhmsService


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
    tls = parser.add_argument_group("TLS on the Thrift port")
    tls.add_argument("--tls-cert", type=Path, help="PEM certificate chain (with its key unless --tls-key)")
    tls.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
    tls.add_argument("--tls-client-ca", type=Path, help="PEM CA: require client certificates it signed")
    limits = parser.add_argument_group("Thrift server limits")
    for flag, field, kind, unit in (
        ("--max-connections", "max_connections", int, ""),
        ("--max-connections-per-peer", "max_connections_per_peer", int, ""),
        ("--max-frame-size", "max_frame_size", int, " bytes"),
        ("--first-frame-timeout", "first_frame_timeout", float, " s"),
        ("--idle-timeout", "idle_timeout", float, " s"),
        ("--frame-timeout", "frame_timeout", float, " s"),
    ):
        default = getattr(DEFAULT_SERVER_LIMITS, field)
        limits.add_argument(flag, type=kind, default=default, help=f"default {default}{unit}")


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
        limits = dataclasses.replace(
            DEFAULT_SERVER_LIMITS,
            **{f.name: getattr(args, f.name) for f in dataclasses.fields(DEFAULT_SERVER_LIMITS)},
        )
        ssl_context = None
        if args.tls_cert is not None:
            ssl_context = server_context(args.tls_cert, args.tls_key, client_ca=args.tls_client_ca)
        elif args.tls_key is not None or args.tls_client_ca is not None:
            raise ValueError("--tls-key and --tls-client-ca need --tls-cert")
    except (VhmsError, TlsConfigError, ValueError) as exc:
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
            **wal_options(args),
            limits=limits,
            ssl_context=ssl_context,
        )
    except DataDirInUseError as exc:
        print(f"artimon vhms: {exc}", file=sys.stderr)
        return 1
    service.start(args.zk, register=not args.no_register)
    http = f", HTTP on {service.http.url}" if service.http else ""
    http = (" over TLS" if ssl_context else "") + http
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
