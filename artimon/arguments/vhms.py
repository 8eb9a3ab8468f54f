"""``artimon vhms``'s arguments; the command itself: ``artimon/commands/vhms.py``.

Defaults that VHMS defines (its rings, its Thrift server's limits) are ``None`` here and
filled by the command from ``vhms``: reading them would import the store."""

from __future__ import annotations

import argparse
from pathlib import Path

from artimon.arguments._web import add_web_config_argument

__all__ = ["add_arguments", "add_resolutions_argument", "add_wal_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shard", default="default", help="shard name (default: default)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=0, help="Thrift port (0: any free one)")
    parser.add_argument("--http-port", type=int, default=0, help="HTTP health/stats port (0: any free one)")
    add_web_config_argument(parser, "the HTTP port")
    parser.add_argument("--data-dir", type=Path, default=Path("artimon-data/vhms"), help="snapshot directory")
    parser.add_argument("--snapshot-every", type=float, default=300.0, help="seconds between snapshots")
    add_wal_arguments(parser)
    add_resolutions_argument(parser, "60s:60,5m:48,15m:96,1h:72")
    parser.add_argument("--max-series", type=int, default=2_000_000, help="series the shard holds at most")
    parser.add_argument(
        "--zk",
        default=None,
        help="ZooKeeper connect string[/root] (default $ARTIMON_ZK, else 127.0.0.1:2181)",
    )
    parser.add_argument("--no-register", action="store_true", help="do not register in ZooKeeper")
    catch_up = parser.add_argument_group("catching up from the shard's other members (vhms.server.catchup)")
    catch_up.add_argument(
        "--catch-up",
        action="store_true",
        help="at start, pull what the shard's other live members hold; reads are refused until done",
    )
    catch_up.add_argument(
        "--catch-up-delay", type=float, default=2.0, help="seconds to let writers see this member first"
    )
    catch_up.add_argument("--catch-up-timeout", type=float, default=30.0, help="seconds per chunk asked")
    catch_up.add_argument(
        "--catch-up-chunk-bytes", type=int, default=8 * 1024 * 1024, help="ring bytes per chunk at most"
    )
    tls = parser.add_argument_group("TLS on the Thrift port")
    tls.add_argument("--tls-cert", type=Path, help="PEM certificate chain (with its key unless --tls-key)")
    tls.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
    tls.add_argument("--tls-client-ca", type=Path, help="PEM CA: require client certificates it signed")
    tls.add_argument(
        "--tls-peer-ca",
        type=Path,
        help="PEM CA of the peers' certificates, for --catch-up (default: the system's)",
    )
    limits = parser.add_argument_group("Thrift server limits (defaults: vhms.server.DEFAULT_SERVER_LIMITS)")
    for flag, kind, unit, what in (
        ("--max-connections", int, "", "connections open at once (default 64)"),
        ("--max-connections-per-peer", int, "", "connections of one peer address (default 16)"),
        ("--max-frame-size", int, "bytes", "the largest request (default 268435456: 256 MiB)"),
        ("--first-frame-timeout", float, "seconds", "how long a new connection may stay silent (default 10)"),
        ("--idle-timeout", float, "seconds", "how long a connection may sit between requests (default 300)"),
        ("--frame-timeout", float, "seconds", "how long a request may take to arrive (default 60)"),
    ):
        limits.add_argument(flag, type=kind, default=None, metavar=unit.upper() or "N", help=what)


def add_resolutions_argument(parser: argparse.ArgumentParser, default: str) -> None:
    """The store's rings (``artimon vhms`` and ``artimon up`` share the flag; its text is
    parsed by ``vhms.parse_resolutions``): ``default`` says what ``None`` stands for."""
    parser.add_argument(
        "--resolutions",
        default=None,
        help=f"rings STEP:SLOTS[:AGGREGATE],... e.g. 5s:1440,5m:48:max (default {default})",
    )


def add_wal_arguments(parser: argparse.ArgumentParser) -> None:
    """The write-ahead log's flags (``artimon vhms`` and ``artimon up`` share them)."""
    parser.add_argument(
        "--no-wal",
        action="store_true",
        help="no write-ahead log: a crash loses what came since the last snapshot",
    )
    parser.add_argument(
        "--wal-fsync",
        choices=("always", "periodic"),  # vhms.FSYNC_POLICIES (a test keeps them equal)
        default="always",
        help="always: an ingest is answered once fsynced (survives a power loss; default); "
        "periodic: once written, fsynced every --wal-fsync-period (survives a crash of the process)",
    )
    parser.add_argument(
        "--wal-fsync-period", type=float, default=1.0, help="seconds between fsyncs with periodic (1)"
    )
