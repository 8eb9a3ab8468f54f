"""``artimon up``'s arguments; the command itself: ``artimon/commands/up.py``."""

from __future__ import annotations

import argparse
from pathlib import Path

from artimon.arguments._web import add_web_config_argument
from artimon.arguments.api import add_budget_arguments
from artimon.arguments.vhms import add_resolutions_argument, add_wal_arguments

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--demo", action="store_true", help="add demo applications and alerting rules")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("artimon-data"),
        help="where every component keeps its data (default ./artimon-data)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=None,
        help="seconds between polling rounds (default 60, 5 with --demo)",
    )
    parser.add_argument("--rounds", type=int, default=0, help="stop after N rounds (0: never)")
    parser.add_argument(
        "--zk-port", type=int, default=2181, help="ZooKeeper's port (default 2181; 0: any free one)"
    )
    parser.add_argument("--api-port", type=int, default=8080, help="query API port (0: any free one)")
    parser.add_argument(
        "--thrift-port", type=int, default=4141, help="the agent's Flume Thrift source port (0: any free one)"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="bind address of every listener (0.0.0.0 for every interface)"
    )
    parser.add_argument("--no-spark", action="store_true", help="no Spark raw_ingest (no Parquet history)")
    parser.add_argument(
        "--hdfs", action="store_true", help="keep the history on an embedded HDFS (hdfs://), not in file://"
    )
    parser.add_argument(
        "--hdfs-port", type=int, default=0, help="the NameNode's port with --hdfs (0: any free)"
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="run Spark's jobs on a standalone master and worker of their own (under <data-dir>/spark)",
    )
    parser.add_argument(
        "--kafka",
        action="store_true",
        help="Kafka between the polling agent and the store agent (a local broker unless $ARTIMON_KAFKA "
        "names bootstrap servers); agents in <data-dir>/agents-kafka.properties",
    )
    add_resolutions_argument(parser, "the poll interval for 2 hours, then 5m:48,15m:96,1h:72")
    add_wal_arguments(parser)
    add_budget_arguments(parser)
    add_web_config_argument(
        parser,
        "every HTTP port of the stack (query API, VHMS, the agent's monitoring; "
        "up's agent scrapes them as a user of its own)",
    )
