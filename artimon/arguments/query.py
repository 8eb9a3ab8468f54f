"""``artimon query``'s arguments; the command itself: ``artimon/commands/query.py``."""

from __future__ import annotations

import argparse
import os

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", help="the query, e.g. 'fetch(\"http.requests\", last=10m) | map(rate, 5m)'")
    parser.add_argument(
        "--url", default=os.environ.get("ARTIMON_API"), help="query API URL (default $ARTIMON_API)"
    )
    parser.add_argument("--zk", default=None, help="read the shards registered in this ZooKeeper instead")
    parser.add_argument("--token", default=os.environ.get("ARTIMON_API_TOKEN"), help="bearer token for --url")
    parser.add_argument(
        "--format",
        choices=["table", "json", "csv"],
        default="table",
        help="a table of the last instants, the API's JSON, or CSV of every instant",
    )
    parser.add_argument(
        "--last", type=int, default=8, help="instants shown per series in a table (default 8)"
    )
