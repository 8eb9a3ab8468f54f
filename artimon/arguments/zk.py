"""``artimon zk``'s arguments; the command itself: ``artimon/commands/zk.py``."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=2181, help="client port (default 2181)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("artimon-data/zookeeper"),
        help="where ZooKeeper keeps its data and log (default ./artimon-data/zookeeper)",
    )
