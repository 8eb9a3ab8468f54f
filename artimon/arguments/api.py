"""``artimon api``'s arguments; the command itself: ``artimon/commands/api.py``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from artimon.arguments._web import add_web_config_argument

__all__ = ["add_arguments", "add_budget_arguments"]


def _mib(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a size in MiB must be positive, got {value}")
    return value


def add_budget_arguments(parser: argparse.ArgumentParser) -> None:
    """The query API's memory budgets (``artimon api`` and ``artimon up`` share them; the
    defaults are query_dsl.budget's, which a test keeps equal)."""
    group = parser.add_argument_group(
        "query memory (as Prometheus's --query.max-samples and --query.max-concurrency)"
    )
    group.add_argument(
        "--query-max-mib",
        type=_mib,
        default=1024,
        help="MiB one query's working set may reach (estimated before it is allocated); over it, "
        "422 on Prometheus's API, 413 on the DSL's (default 1024)",
    )
    group.add_argument(
        "--query-budget-mib",
        type=_mib,
        default=4096,
        help="MiB all queries of the process may hold at once (default 4096)",
    )
    group.add_argument(
        "--query-wait",
        type=float,
        default=5.0,
        help="seconds a query waits for others' memory before its 503 with Retry-After (default 5)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="bind address")
    parser.add_argument("--port", type=int, default=8080, help="HTTP port (0: any free one)")
    parser.add_argument(
        "--zk",
        default=None,
        help="ZooKeeper connect string[/root] (default $ARTIMON_ZK, else 127.0.0.1:2181)",
    )
    parser.add_argument(
        "--vhms", action="append", default=[], help="host:port of a shard (instead of ZooKeeper)"
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("ARTIMON_API_TOKEN"),
        help="require this bearer token (default $ARTIMON_API_TOKEN; none: open)",
    )
    add_web_config_argument(parser, "the API (basic_auth_users and --token exclude each other)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds a query may run")
    add_budget_arguments(parser)
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
