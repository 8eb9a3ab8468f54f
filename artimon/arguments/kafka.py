"""``artimon kafka``'s arguments; the command itself: ``artimon/commands/kafka.py``."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        type=int,
        default=9092,
        help="first broker's port; broker n listens on port+n-1 (default 9092; 0 picks free ports)",
    )
    parser.add_argument("--brokers", type=int, default=1, help="nodes, each broker and controller (1 or 3)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("artimon-data/kafka"),
        help="where the nodes keep their logs (default ./artimon-data/kafka)",
    )
    parser.add_argument("--heap", default="512m", help="JVM heap of each node (default 512m)")
