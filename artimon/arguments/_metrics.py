"""``--metrics-port``, ``--metrics-host`` and ``--web.config.file``, which ``artimon alerts``
and ``artimon spark`` share (the server they start: ``artimon/commands/_metrics.py``)."""

from __future__ import annotations

import argparse

from artimon.arguments._web import add_web_config_argument

__all__ = ["add_metrics_arguments"]


def add_metrics_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve /metrics (Prometheus text) and /health on this port (0: any free; default: none)",
    )
    parser.add_argument("--metrics-host", default="127.0.0.1", help="bind address of --metrics-port")
    add_web_config_argument(parser, "--metrics-port")
