"""``--web.config.file`` (Prometheus's flag): the web configuration file of a command's HTTP
listener (read by ``artimon/commands/_web.py``; the format: ``bookkeeper.ground.webconfig``)."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_web_config_argument"]


def add_web_config_argument(parser: argparse.ArgumentParser, listener: str) -> None:
    parser.add_argument(
        "--web.config.file",
        dest="web_config_file",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"Prometheus's web configuration file for {listener}: TLS (tls_server_config), "
        "basic_auth_users (bcrypt), http_server_config.headers, rate_limit (docs/operations.md §6)",
    )
