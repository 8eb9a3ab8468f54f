"""``artimon status``'s arguments; the command itself: ``artimon/commands/status.py``."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--zk",
        default=None,
        help="the site's ZooKeeper: every member, and the root (default $ARTIMON_ZK, else 127.0.0.1:2181)",
    )
    parser.add_argument("--json", action="store_true", help="print the view as one JSON object, for scripts")
    parser.add_argument(
        "--timeout", type=float, default=1.0, help="seconds each probe may take (they run at once)"
    )
    parser.add_argument(
        "--forget",
        action="append",
        default=[],
        metavar="ID",
        help="forget a component that is gone for good (decommissioned): the id the view shows "
        "missing (agents/<group>/<agent-id>, vhms/<shard>/<ip:port>, services/<kind>/<name>); repeatable",
    )
    parser.add_argument("--forget-missing", action="store_true", help="forget every component missing now")
