"""``artimon agent``'s arguments; the command itself: ``artimon/commands/agent.py``."""

from __future__ import annotations

import argparse
from pathlib import Path

from artimon.arguments._web import add_web_config_argument

__all__ = ["add_arguments"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--conf-file", type=Path, required=True, help="the properties file")
    parser.add_argument("-n", "--name", required=True, help="the agent's name in the file (a1 in a1.sources)")
    parser.add_argument("--monitor-host", default="127.0.0.1", help="monitoring bind address")
    parser.add_argument("--monitor-port", type=int, default=41414, help="monitoring port (0: any free one)")
    parser.add_argument("--no-monitor", action="store_true", help="no monitoring HTTP server")
    add_web_config_argument(parser, "the monitoring port")
    parser.add_argument(
        "--reload-interval", type=float, default=30.0, help="seconds between file checks (0: never)"
    )
    parser.add_argument("--zk", default=None, help="ZooKeeper for the agent's self-report and central config")
    parser.add_argument(
        "--report-host",
        default="127.0.0.1",
        help="bind address of the self-report endpoint (with --zk); 0.0.0.0 for every interface, "
        "which registers the outward address so that agents on other hosts can poll it",
    )
    parser.add_argument(
        "--config-from-zk",
        action="store_true",
        help="follow this agent's central configuration in ZooKeeper (artimon config push --agent ID)",
    )
    parser.add_argument(
        "--config-group",
        default=None,
        help="follow this group's central configuration (artimon config push --group G; implies "
        "--config-from-zk; the agent's own one overrides it)",
    )
    parser.add_argument(
        "--agent-id",
        default=None,
        help="this agent's id in the central configuration and its report (default its name; "
        "unique in a group)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check the file: print its problems and unknown keys, exit 1 on an error (as promtool)",
    )
    parser.add_argument(
        "--allow-remote-classes",
        action="store_true",
        help="let the central configuration name module:Class types (default: registered aliases only)",
    )
