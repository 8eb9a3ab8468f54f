"""The metrics server of the commands that have no HTTP API of their own: ``--metrics-port``
of ``artimon alerts`` and ``artimon spark`` serves their collectors (the gauges are the
stack's, :mod:`artimon.stack.metrics`) with the process's on ``/metrics``, beside
``/health``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from bookkeeper.ground import BackgroundServer, WebConfig
from query_dsl import Collector, metrics_app

__all__ = ["serve_metrics"]


def serve_metrics(
    args: argparse.Namespace,
    component: str,
    collectors: Sequence[Collector],
    web_config: WebConfig | None = None,
) -> BackgroundServer | None:
    """``--metrics-port``'s server, started (and its URL printed), or ``None`` without it;
    ``web_config`` is ``--web.config.file``'s, read by the command before its work begins."""
    if args.metrics_port is None:
        return None
    server = BackgroundServer(
        metrics_app(component, collectors),
        args.metrics_host,
        args.metrics_port,
        name=f"{component}-metrics",
        web_config=web_config,
    )
    server.start()
    print(f"metrics on {server.url}/metrics", flush=True)
    return server
