"""``artimon alerts``'s arguments; the command itself: ``artimon/commands/alerts.py``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from artimon.arguments._metrics import add_metrics_arguments

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--file", type=Path, help="the rules file (YAML: ours or Prometheus's)")
    parser.add_argument(
        "--api", default=os.environ.get("ARTIMON_API"), help="query API URL (default $ARTIMON_API)"
    )
    parser.add_argument("--zk", default=None, help="query the shards registered in this ZooKeeper instead")
    parser.add_argument("--token", default=os.environ.get("ARTIMON_API_TOKEN"), help="bearer token for --api")
    parser.add_argument(
        "--state",
        type=Path,
        default=Path("artimon-alerts/state.json"),
        help="where alerts are kept across restarts; its directory is held by this process alone "
        "(default artimon-alerts/state.json: not artimon up's own, artimon-data/alerts-state.json)",
    )
    parser.add_argument("--once", action="store_true", help="evaluate once, notify, and exit")
    parser.add_argument(
        "--check",
        nargs="*",
        type=Path,
        metavar="FILE",
        help="check the rules file (or each FILE, as promtool check rules does) and exit",
    )
    parser.add_argument(
        "--alertmanager",
        action="append",
        default=[],
        metavar="URL",
        help="also send every rule's alerts to this Alertmanager (repeatable)",
    )
    add_metrics_arguments(parser)
    parser.add_argument(
        "--notify-timeout",
        type=float,
        default=60.0,
        help="seconds to wait for queued notifications when stopping (default 60)",
    )
