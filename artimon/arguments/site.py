"""``artimon site``'s arguments; the command itself: ``artimon/commands/site.py``."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action", choices=["up", "down"], help="up: make the hosts and run until Ctrl-C; down: remove a site"
    )
    parser.add_argument("--hosts", type=int, default=3, help="how many hosts (network namespaces), 1 to 99")
    parser.add_argument(
        "--zookeeper",
        action="store_true",
        help="run a ZooKeeper ensemble of 3 on hosts h1, h2 and h3 (needs --hosts 3 or more)",
    )
    parser.add_argument(
        "--topology",
        choices=["full"],
        default=None,
        help="full: the grown-up topology (ZooKeeper, Kafka, HDFS, Spark, VHMS 2x2, store agents, "
        "query APIs, demo apps and a polling agent per app host; needs --hosts 8 or more)",
    )
    parser.add_argument(
        "--interval", type=float, default=10.0, help="with --topology: seconds per polling round (default 10)"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("artimon-data/site"),
        help="where the site's servers keep their data and logs (default ./artimon-data/site)",
    )
