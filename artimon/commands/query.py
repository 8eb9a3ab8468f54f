"""Run one query and print the result: a table (default), JSON or CSV. Reads through the
query API (--url, else $ARTIMON_API) or, with --zk, straight from the VHMS shards."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

from query_dsl import Client, Evaluator, Matrix, QueryError, ShardedSource, to_csv


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", help="the query, e.g. 'fetch(\"http.requests\", last=10m) | map(rate, 5m)'")
    parser.add_argument(
        "--url", default=os.environ.get("ARTIMON_API"), help="query API URL (default $ARTIMON_API)"
    )
    parser.add_argument("--zk", default=None, help="read the shards registered in this ZooKeeper instead")
    parser.add_argument("--token", default=os.environ.get("ARTIMON_API_TOKEN"), help="bearer token for --url")
    parser.add_argument("--format", choices=["table", "json", "csv"], default="table")
    parser.add_argument(
        "--last", type=int, default=8, help="instants shown per series in a table (default 8)"
    )


def _table(result: Matrix | float, last: int) -> str:
    if not isinstance(result, Matrix):
        return f"{result:g}"
    if not len(result):
        return "(no series)"
    times = [time.strftime("%H:%M", time.gmtime(t / 1000)) for t in result.timestamps[-last:].tolist()]
    keys = result.series_keys()
    width = min(60, max(len(k) for k in keys))
    lines = [f"{'series':<{width}}  " + "  ".join(f"{t:>10}" for t in times)]
    for key, row in zip(keys, result.values[:, -last:], strict=True):
        cells = "  ".join(f"{'-' if math.isnan(v) else f'{v:.4g}':>10}" for v in row.tolist())
        lines.append(f"{key[:width]:<{width}}  {cells}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        if args.zk:
            source = ShardedSource(args.zk)
            try:
                result = Evaluator(source).evaluate(args.query)
            finally:
                source.close()
        else:
            if not args.url:
                print("artimon query: give --url (or $ARTIMON_API) or --zk", file=sys.stderr)
                return 2
            with Client(args.url, token=args.token) as client:
                result = client.query(args.query)
    except QueryError as exc:
        print(f"artimon query: {exc}", file=sys.stderr)
        return 1
    if args.format == "json":
        print(json.dumps(result.to_records() if isinstance(result, Matrix) else {"scalar": result}))
    elif args.format == "csv":
        print(to_csv(result), end="")
    else:
        print(_table(result, args.last))
    return 0
