"""``artimon <command>``: one entry point, a subcommand per component.

Commands register in ``COMMANDS`` (name -> module path of a ``configure(parser)`` and
``run(args) -> int`` pair), so ``artimon --help`` lists them all and a command's imports
are paid only when it runs.

``artimon --zk-auth-file FILE <command>`` gives every ZooKeeper client of the command (and
of the processes it starts) the platform's credentials, read from FILE (``user:password``),
through ``$ARTIMON_ZK_AUTH_FILE``; without it ``$ARTIMON_ZK_AUTH`` or ``$ARTIMON_ZK_AUTH_FILE``
apply. Credentials that are not ``user:password`` stop the command with exit status 2.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import sys
from pathlib import Path
from types import ModuleType

from bookkeeper import ZkAuthError
from bookkeeper.zk import AUTH_ENV, AUTH_FILE_ENV, ZkAuth, resolve_zk_auth

__all__ = ["COMMANDS", "main"]

COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("artimon.commands.up", "run the embedded stack on this machine (--demo adds demo apps)"),
    "agent": ("artimon.commands.agent", "run a collector agent from a Flume-style properties file"),
    "api": ("artimon.commands.api", "serve the HTTP query API over the VHMS shards"),
    "query": ("artimon.commands.query", "run one query and print a table, JSON or CSV"),
    "alerts": ("artimon.commands.alerts", "evaluate alerting rules every interval and notify"),
    "dashboards": ("artimon.commands.dashboards", "check saved dashboards (--check DIR)"),
    "spark": ("artimon.commands.spark", "run a Spark job: raw_ingest, analyze, backfill_vhms"),
    "vhms": ("artimon.commands.vhms", "run a VHMS shard (the multi-resolution store)"),
    "zk": ("artimon.commands.zk", "run a ZooKeeper server from the jars in the pyspark wheel"),
    "hdfs": ("artimon.commands.hdfs", "run a single-node HDFS (NameNode + DataNode) from Hadoop's jars"),
    "kafka": ("artimon.commands.kafka", "run an Apache Kafka cluster (KRaft) from Apache's jars"),
    "endpoints": ("artimon.commands.endpoints", "list the bookkeeper endpoints in ZooKeeper"),
    "read": ("artimon.commands.read", "read one bookkeeper endpoint and print its variables"),
}


def _command_module(name: str) -> ModuleType:
    """A command's module; without the platform installed, a plain message, not a traceback."""
    try:
        return importlib.import_module(COMMANDS[name][0])
    except ModuleNotFoundError as exc:  # pyspark, fastapi, ...: the platform extra is not installed
        needs = f"artimon {name} needs the platform: pip install 'artimon[platform]'"
        raise SystemExit(f"{needs} ({exc})") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="artimon",
        description="Artimon: labeled variables, polled every minute, stored and queried.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    parser.add_argument(
        "--zk-auth-file",
        type=Path,
        default=None,
        help=f"ZooKeeper credentials: a file holding user:password (default ${AUTH_ENV}, ${AUTH_FILE_ENV})",
    )
    subcommands = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for name, (_, summary) in COMMANDS.items():
        module = _command_module(name)
        sub = subcommands.add_parser(name, help=summary, description=module.__doc__)
        module.configure(sub)
        sub.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for chatty in ("kazoo", "httpx"):  # a line per connection or request drowns the command's own
        logging.getLogger(chatty).setLevel(logging.WARNING if not args.verbose else logging.DEBUG)
    try:
        if args.zk_auth_file is not None:
            ZkAuth.from_file(args.zk_auth_file)
            os.environ.pop(AUTH_ENV, None)  # the command line wins
            os.environ[AUTH_FILE_ENV] = str(args.zk_auth_file.resolve())
        resolve_zk_auth()
    except ZkAuthError as exc:
        print(f"artimon: {exc}", file=sys.stderr)
        return 2
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped to a reader that left (`| head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise
        print(f"artimon {args.command}: {exc.strerror}; choose another address or port", file=sys.stderr)
        return 2
