"""``backfill_vhms``: rebuilds a VHMS's buckets over a time range from the Parquet history
(after a restart without a snapshot). Samples are sent in columns of ``--chunk`` through the
VHMS ingest; VHMS ingest is idempotent, so a backfill over data it already has changes
nothing."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from spark_jobs.analyze import _ms
from spark_jobs.history import ParquetSource
from vhms.client import VhmsClient

__all__ = ["backfill", "configure", "run_query"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", required=True, help="raw_ingest's Parquet root (file:// or hdfs://)")
    parser.add_argument("--start", required=True, help="epoch ms or ISO 8601")
    parser.add_argument("--end", required=True, help="epoch ms or ISO 8601")
    parser.add_argument("--vhms", required=True, help="host:port of the VHMS to fill")
    parser.add_argument("--chunk", type=int, default=100_000, help="samples per ingest call")


def backfill(spark: Any, path: str, start_ms: int, end_ms: int, client: Any, chunk: int = 100_000) -> int:
    """Send every sample of ``[start_ms, end_ms)`` to ``client`` (a VhmsClient or anything
    with its ``ingest``); returns the number of samples sent."""
    from pyspark.sql import functions as F

    rows = (
        ParquetSource(spark, path)
        ._samples(start_ms, end_ms)
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
            client.ingest(
                keys,
                np.array(values),
                np.array(times, dtype=np.int64),
                (strings[0], strings[1], np.array(strings[2], dtype=np.int64)),
            )
            sent += len(keys) + len(strings[0])
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


def run_query(spark: Any, args: argparse.Namespace) -> int:
    host, _, port = args.vhms.rpartition(":")
    with VhmsClient(host, int(port)) as client:
        sent = backfill(spark, args.input, _ms(args.start), _ms(args.end), client, args.chunk)
    print(f"backfilled {sent} samples into {args.vhms}")
    return 0
