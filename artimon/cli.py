"""``artimon <command>``: one entry point, a subcommand per component.

Commands are listed in ``COMMANDS`` (name -> one line of help). Command ``<name>`` is two
modules: ``artimon/arguments/<name>.py`` declares its arguments (``add_arguments(parser)``,
standard library only) and ``artimon/commands/<name>.py`` runs it (``run(args) -> int``).
Parsing fills the chosen command's parser only, and its description is the docstring of
its ``commands`` module, read without importing it; :func:`load_command` imports the
command's module, and with it what the command runs (Spark, the store, the HTTP server),
only once the command line is valid, so ``artimon --help`` and ``artimon <name> --help``
import none of it.

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
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from artimon.arguments import HelpFormatter, LazyParser, module_doc

__all__ = ["COMMANDS", "EXAMPLES", "CommandParser", "build_parser", "load_command", "main"]

COMMANDS: dict[str, str] = {
    "up": "run the embedded stack on this machine (--demo adds demo apps)",
    "agent": "run a collector agent from a Flume-style properties file",
    "api": "serve the HTTP query API over the VHMS shards",
    "query": "run one query and print a table, JSON or CSV",
    "alerts": "evaluate alerting rules every interval and notify",
    "dashboards": "check saved dashboards (--check DIR)",
    "spark": "run a Spark job: raw_ingest, analyze, backfill_vhms",
    "vhms": "run a VHMS shard (the multi-resolution store)",
    "zk": "run a ZooKeeper server from the jars in the pyspark wheel",
    "hdfs": "run a single-node HDFS (NameNode + DataNode) from Hadoop's jars",
    "kafka": "run an Apache Kafka cluster (KRaft) from Apache's jars",
    "site": "run a site of many hosts (network namespaces) on this machine",
    "endpoints": "list the bookkeeper endpoints in ZooKeeper",
    "config": "push, pull or diff agents' central configuration in ZooKeeper",
    "status": "show the site in one screen: who is alive, who owns what, lag, what is degraded",
    "read": "read one bookkeeper endpoint and print its variables",
}

# what each command's --help ends on: command lines to start from
EXAMPLES: dict[str, tuple[str, ...]] = {
    "up": ("artimon up --demo", "artimon up --data-dir /var/lib/artimon --interval 60 --hdfs --kafka"),
    "agent": ("artimon agent -f agent.properties -n a1",),
    "api": ("artimon api --zk 127.0.0.1:2181 --port 8080 --dashboards dashboards/",),
    "query": (
        "artimon query 'fetch(\"http.requests\", last=10m) | map(rate, 5m) | reduce(sum, by=[method])'",
        "artimon query --format csv --last 60 'fetch(\"rack.temperature.celsius\")'",
    ),
    "alerts": (
        "artimon alerts -f docs/examples/alerts.yaml --api http://127.0.0.1:8080",
        "artimon alerts --check rules.yaml",
    ),
    "dashboards": ("artimon dashboards --check artimon-data/dashboards",),
    "spark": (
        "artimon spark analyze --input file:///srv/history/parquet --query 'fetch(\"hits\")' "
        "--start 2026-11-01 --end 2026-11-02 --output out --format csv",
        "artimon spark --master spark://127.0.0.1:7077 raw_ingest --help",
    ),
    "vhms": ("artimon vhms --port 7001 --data-dir vhms-data --resolutions 60s:60,5m:48,15m:96,1h:72",),
    "zk": ("artimon zk --port 2181 --data-dir zk-data",),
    "hdfs": ("artimon hdfs --data-dir hdfs-data",),
    "kafka": ("artimon kafka --data-dir kafka-data",),
    "site": (
        "sudo artimon site up --hosts 4 --zookeeper",
        "sudo artimon site up --hosts 8 --topology full",
        "sudo artimon site down",
    ),
    "endpoints": ("artimon endpoints --zk 127.0.0.1:2181",),
    "config": (
        "artimon config push -f edge.properties --group edge",
        "artimon config diff -f edge.properties --group edge",
    ),
    "status": ("artimon status", "artimon status --zk h1:2181,h2:2181,h3:2181/artimon --json"),
    "read": ("artimon read 127.0.0.1:41234",),
}


class CommandParser(argparse.ArgumentParser):
    """``artimon``'s parser; ``commands`` holds each command's (filled when used). An
    option a command does not know is refused with that command's usage, not the top
    level's."""

    commands: dict[str, argparse.ArgumentParser]

    def parse_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            command = self.commands.get(getattr(parsed, "command", None) or "", self)
            command.error(f"unrecognized arguments: {' '.join(unknown)}")
        return parsed


def _example_lines(name: str) -> str:
    return (
        "example"
        + ("s" if len(EXAMPLES[name]) > 1 else "")
        + ":\n"
        + "\n".join(f"  {e}" for e in EXAMPLES[name])
    )


def _command_arguments(name: str) -> Callable[[argparse.ArgumentParser], None]:
    """What fills command ``name``'s parser: its description and its arguments."""

    def fill(parser: argparse.ArgumentParser) -> None:
        parser.description = module_doc(f"artimon.commands.{name}")
        importlib.import_module(f"artimon.arguments.{name}").add_arguments(parser)

    return fill


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog="artimon",
        description="Artimon: labeled variables, polled every minute, stored and queried.",
        epilog="example:\n  artimon up --demo\n\nartimon <command> --help tells more of each command.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    parser.add_argument(
        "--zk-auth-file",
        type=Path,
        default=None,
        help="ZooKeeper credentials: a file holding user:password "
        "(default $ARTIMON_ZK_AUTH, $ARTIMON_ZK_AUTH_FILE)",
    )
    subcommands = parser.add_subparsers(
        dest="command", metavar="<command>", required=True, parser_class=LazyParser
    )
    parser.commands = {
        name: subcommands.add_parser(
            name, help=summary, fill=_command_arguments(name), epilog=_example_lines(name)
        )
        for name, summary in COMMANDS.items()
    }
    return parser


def load_command(name: str) -> ModuleType:
    """The module that runs command ``name`` (its ``run(args)``): the one place a command's
    dependencies are imported; without the platform installed, a plain message, not a
    traceback."""
    try:
        return importlib.import_module(f"artimon.commands.{name}")
    except ModuleNotFoundError as exc:  # pyspark, fastapi, ...: the platform extra is not installed
        needs = f"artimon {name} needs the platform: pip install 'artimon[platform]'"
        raise SystemExit(f"{needs} ({exc})") from None


def _use_zk_auth(args: argparse.Namespace) -> int | None:
    """Apply ``--zk-auth-file`` (or check the environment's credentials); 2 if they are
    not ``user:password``. The ZooKeeper client loads here, past ``--help``."""
    from bookkeeper import ZkAuthError
    from bookkeeper.zk import AUTH_ENV, AUTH_FILE_ENV, ZkAuth, resolve_zk_auth

    try:
        if args.zk_auth_file is not None:
            ZkAuth.from_file(args.zk_auth_file)
            os.environ.pop(AUTH_ENV, None)  # the command line wins
            os.environ[AUTH_FILE_ENV] = str(args.zk_auth_file.resolve())
        resolve_zk_auth()
    except ZkAuthError as exc:
        print(f"artimon: {exc}", file=sys.stderr)
        return 2
    return None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for chatty in ("kazoo", "httpx"):  # a line per connection or request drowns the command's own
        logging.getLogger(chatty).setLevel(logging.WARNING if not args.verbose else logging.DEBUG)
    refused = _use_zk_auth(args)
    if refused is not None:
        return refused
    try:
        return int(load_command(args.command).run(args))
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
