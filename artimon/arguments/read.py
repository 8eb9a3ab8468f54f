"""``artimon read``'s arguments; the command itself: ``artimon/commands/read.py``."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("address", help="HOST:PORT of the endpoint")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
