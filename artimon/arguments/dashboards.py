"""``artimon dashboards``'s arguments; the command itself: ``artimon/commands/dashboards.py``."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", type=Path, help="the dashboards directory (artimon api --dashboards)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="validate every dashboard of the directory: what the command does, written as promtool's "
        "check is, and also without the flag",
    )
