"""``artimon endpoints``'s arguments; the command itself: ``artimon/commands/endpoints.py``."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--zk", default=None, help="connect string[/root] (default $ARTIMON_ZK, else 127.0.0.1:2181)"
    )
