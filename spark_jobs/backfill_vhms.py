"""``backfill_vhms``: rebuilds VHMS's buckets over a time range from the Parquet history
(after a restart without a snapshot). Samples are sent in columns of ``--chunk`` through
VHMS's sharded client, so each series lands on the shard the consistent-hash ring names
(and on every member of it), exactly where the agents' sinks put it. VHMS ingest is
idempotent, so a backfill over data it already has changes nothing."""

from __future__ import annotations

import argparse
from typing import Any, Protocol

import numpy as np

from bookkeeper.wire import IngestColumns
from spark_jobs.analyze import _ms
from spark_jobs.history import ParquetSource
from vhms import ShardedClient

__all__ = ["Ingester", "backfill", "configure", "run_query"]


class Ingester(Protocol):
    def ingest(self, columns: IngestColumns) -> tuple[int, int]: ...


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", required=True, help="raw_ingest's Parquet root (file:// or hdfs://)")
    parser.add_argument("--start", required=True, help="epoch ms or ISO 8601")
    parser.add_argument("--end", required=True, help="epoch ms or ISO 8601")
    parser.add_argument(
        "--zk", help="ZooKeeper where the shards register (default $ARTIMON_ZK, else 127.0.0.1:2181)"
    )
    parser.add_argument(
        "--vhms",
        action="append",
        default=[],
        metavar="SHARD@HOST:PORT",
        help="a shard member to fill, instead of ZooKeeper (repeat for every member of every shard)",
    )
    parser.add_argument("--chunk", type=int, default=100_000, help="samples per ingest call")


def backfill(
    spark: Any, path: str, start_ms: int, end_ms: int, client: Ingester, chunk: int = 100_000
) -> int:
    """Send every sample of ``[start_ms, end_ms)`` to ``client`` (a :class:`vhms.ShardedClient`
    or anything with its ``ingest``); returns the number of samples sent."""
    from pyspark.sql import functions as F

    rows = (
        ParquetSource(spark, path)
        .samples(start_ms, end_ms)
        .select("series", "type", "value", "string_value", F.unix_millis("ts").alias("ts_ms"))
        .toLocalIterator()
    )
    sent = 0
    keys: list[str] = []
    values: list[float] = []
    times: list[int] = []
    strings: tuple[list[str], list[str], list[int]] = ([], [], [])

    def flush() -> None:
        nonlocal sent
        if keys or strings[0]:
            columns = IngestColumns.from_keys(
                list(keys),
                np.array(values, dtype=np.float64),
                np.array(times, dtype=np.int64),
                list(strings[0]),
                list(strings[1]),
                np.array(strings[2], dtype=np.int64),
            )
            client.ingest(columns)
            sent += len(columns)
        for column in (keys, values, times, *strings):
            column.clear()

    for row in rows:
        if row["type"] == 3:
            strings[0].append(row["series"])
            strings[1].append(row["string_value"])
            strings[2].append(row["ts_ms"])
        else:
            keys.append(row["series"])
            values.append(row["value"])
            times.append(row["ts_ms"])
        if len(keys) + len(strings[0]) >= chunk:
            flush()
    flush()
    return sent


def _servers(items: list[str]) -> dict[str, list[tuple[str, int]]]:
    servers: dict[str, list[tuple[str, int]]] = {}
    for item in items:
        shard, at, address = item.rpartition("@")
        host, colon, port = address.rpartition(":")
        if not (at and shard and colon and host and port.isdigit()):
            raise SystemExit(f"backfill_vhms: --vhms {item!r} is not SHARD@HOST:PORT")
        servers.setdefault(shard, []).append((host, int(port)))
    return servers


def run_query(spark: Any, args: argparse.Namespace) -> int:
    servers = _servers(args.vhms) if args.vhms else None
    with ShardedClient(args.zk, servers=servers) as client:
        if not client.wait_ready(30) or not client.shards:
            print("backfill_vhms: no VHMS shard found", flush=True)
            return 1
        sent = backfill(spark, args.input, _ms(args.start), _ms(args.end), client, args.chunk)
        shards = ", ".join(sorted(client.shards))
        print(f"backfilled {sent} samples into {len(client.shards)} shard(s): {shards}")
    return 0
