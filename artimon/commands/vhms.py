"""Run a VHMS shard: the in-memory multi-resolution store behind Thrift and HTTP, registered
in ZooKeeper (--zk, else $ARTIMON_ZK), snapshotted into --data-dir with every acknowledged
ingest in a write-ahead log beside the snapshot (unless --no-wal); until Ctrl-C, when it
writes a last snapshot. --tls-cert and --tls-key make the Thrift port speak TLS only
(--tls-client-ca: clients must present a certificate it signed); the --max-connections...
--frame-timeout flags are the Thrift server's limits (bookkeeper.wire.ServerLimits). With
--catch-up it pulls what the shard's other live members hold at start (docs/vhms.md)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING

from artimon.commands._signals import stop_event
from artimon.commands._web import web_config_of
from bookkeeper import TlsConfigError
from bookkeeper.ground import keep_freed_memory_returnable
from bookkeeper.wire import client_context, server_context
from vhms import DEFAULT_RESOLUTIONS, DataDirInUseError, VhmsError
from vhms.server import DEFAULT_SERVER_LIMITS, CatchUp, Store, VhmsService

if TYPE_CHECKING:  # a type only: importing artimon.stack imports the whole stack (the query API too)
    from artimon.stack import WalOptions


def wal_options(args: argparse.Namespace) -> WalOptions:
    """``VhmsService`` keyword arguments from :func:`add_wal_arguments`' flags."""
    return {"wal": not args.no_wal, "wal_fsync": args.wal_fsync, "wal_fsync_period": args.wal_fsync_period}


def run(args: argparse.Namespace) -> int:
    keep_freed_memory_returnable()  # before the service's threads: large fetches' memory goes back
    try:
        store = Store(args.resolutions or DEFAULT_RESOLUTIONS, max_series=args.max_series)
        given = {f.name: getattr(args, f.name) for f in dataclasses.fields(DEFAULT_SERVER_LIMITS)}
        limits = dataclasses.replace(
            DEFAULT_SERVER_LIMITS, **{name: value for name, value in given.items() if value is not None}
        )
        ssl_context = peer_context = None
        if args.tls_cert is not None:
            ssl_context = server_context(args.tls_cert, args.tls_key, client_ca=args.tls_client_ca)
            peer_context = client_context(args.tls_peer_ca, certfile=args.tls_cert, keyfile=args.tls_key)
        elif args.tls_key is not None or args.tls_client_ca is not None or args.tls_peer_ca is not None:
            raise ValueError("--tls-key, --tls-client-ca and --tls-peer-ca need --tls-cert")
        catch_up = (
            CatchUp(
                delay=args.catch_up_delay,
                timeout=args.catch_up_timeout,
                chunk_bytes=args.catch_up_chunk_bytes,
                ssl_context=peer_context,
            )
            if args.catch_up
            else None
        )
    except (VhmsError, TlsConfigError, ValueError) as exc:
        print(f"artimon vhms: {exc}", file=sys.stderr)
        return 2
    web_config = web_config_of(args, "vhms")
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
            web_config=web_config,
        )
    except DataDirInUseError as exc:
        print(f"artimon vhms: {exc}", file=sys.stderr)
        return 1
    service.start(args.zk, register=not args.no_register, catch_up=catch_up)
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
