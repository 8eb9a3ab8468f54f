"""``artimon hdfs``'s arguments; the command itself: ``artimon/commands/hdfs.py``."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nn-port", type=int, default=8020, help="NameNode RPC port (default 8020)")
    parser.add_argument("--http-port", type=int, default=9870, help="NameNode HTTP port: WebHDFS, JMX (9870)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("artimon-data/hdfs"),
        help="where the NameNode and the DataNode keep their data, logs and conf (./artimon-data/hdfs)",
    )
