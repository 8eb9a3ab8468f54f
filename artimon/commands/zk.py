"""Run a ZooKeeper server from the jars inside the pyspark wheel, bound to --host (default
127.0.0.1), until Ctrl-C. With $ARTIMON_ZK set, check that ensemble answers instead of starting one."""

from __future__ import annotations

import argparse
import os

from artimon.commands._signals import serve_until_stopped
from artimon.servers import ZooKeeperServer, four_letter_word


def run(args: argparse.Namespace) -> int:
    external = os.environ.get("ARTIMON_ZK")
    if external:
        connect = external.partition("/")[0]
        host, _, port = connect.split(",")[0].rpartition(":")
        answer = four_letter_word(host or "127.0.0.1", int(port or 2181))
        print(
            f"ARTIMON_ZK={external}: using that ensemble, not starting one "
            f"({host}:{port} answers {answer or 'nothing'!r})",
            flush=True,
        )
        return 0 if answer == "imok" else 1
    server = ZooKeeperServer(args.data_dir, args.port, host=args.host)

    def ready() -> str:
        return (
            f"ZooKeeper ready on {server.hosts} (pid {server.pid}, data in {args.data_dir}); "
            f"export ARTIMON_ZK={server.hosts} to point other shells at it. Ctrl-C stops it."
        )

    return serve_until_stopped(server, "zk", "ZooKeeper", ready, args.data_dir)
