"""``artimon config``'s arguments; the command itself: ``artimon/commands/config.py``."""

from __future__ import annotations

import argparse
from pathlib import Path

from artimon.arguments import HelpFormatter

__all__ = ["add_arguments"]


def _common(parser: argparse.ArgumentParser) -> None:
    whose = parser.add_mutually_exclusive_group(required=True)
    whose.add_argument("--group", help="the configuration of this agent group (artimon agent --config-group)")
    whose.add_argument(
        "--agent", help="the configuration of this one agent (its --agent-id; overrides its group's)"
    )
    parser.add_argument(
        "--zk", default=None, help="connect string[/root] (default $ARTIMON_ZK, else 127.0.0.1:2181)"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="<action>", required=True)
    push = actions.add_parser(
        "push",
        help="check a properties file, write it as the next version, wait for the agents",
        epilog="example:\n  artimon config push -f edge.properties --group edge",
        formatter_class=HelpFormatter,
    )
    push.add_argument("-f", "--conf-file", type=Path, required=True, help="the properties file")
    _common(push)
    push.add_argument(
        "-n", "--name", default=None, help="the agent's name in the file (default: its only one)"
    )
    push.add_argument(
        "--keep", type=int, default=10, help="versions kept in ZooKeeper (at least 2; default 10)"
    )
    push.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for every agent's answer (default 60)"
    )
    push.add_argument("--no-wait", action="store_true", help="write the version and return at once")
    push.add_argument(
        "--allow-unknown-keys", action="store_true", help="push even with keys no component knows"
    )
    push.add_argument(
        "--allow-remote-classes",
        action="store_true",
        help="check module:Class types as agents run with --allow-remote-classes do",
    )
    pull = actions.add_parser(
        "pull",
        help="print the current configuration (or --version N)",
        epilog="examples:\n  artimon config pull --group edge\n  artimon config pull --group edge --history",
        formatter_class=HelpFormatter,
    )
    _common(pull)
    pull.add_argument("--version", type=int, default=None, help="this kept version, not the current one")
    pull.add_argument(
        "--history", action="store_true", help="list the kept versions and what each agent runs instead"
    )
    diff = actions.add_parser(
        "diff",
        help="a unified diff from the current configuration to a file (or between two versions)",
        epilog="examples:\n  artimon config diff -f edge.properties --group edge\n"
        "  artimon config diff --group edge --version 3 --version 4",
        formatter_class=HelpFormatter,
    )
    _common(diff)
    diff.add_argument("-f", "--conf-file", type=Path, default=None, help="the local properties file")
    diff.add_argument(
        "--version",
        type=int,
        action="append",
        default=[],
        help="compare this version instead of the current one; twice: two versions",
    )
