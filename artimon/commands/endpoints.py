"""List the bookkeeper endpoints registered in ZooKeeper (--zk, else $ARTIMON_ZK)."""

from __future__ import annotations

import argparse

from bookkeeper.ground import list_endpoints
from bookkeeper.zk import make_client, resolve_zk


def run(args: argparse.Namespace) -> int:
    connect, layout = resolve_zk(args.zk)
    client = make_client(connect)
    client.start(timeout=15)
    try:
        found = list_endpoints(client, layout)
    finally:
        client.stop()
        client.close()
    for info in found:
        print(f"{info.context}\t{info.host}:{info.port}\t{info.uuid}")
    print(f"{len(found)} endpoint(s) under {layout.contexts} on {connect}")
    return 0
