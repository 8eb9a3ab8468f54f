"""``analyze``: a query of the language over the Parquet history, written to Parquet or CSV
(where Artimon's users ran Pig scripts). The same frameworks as the query API: select by
name and labels over a time range, map (delta, rate...), reduce by labels, apply. Each
fetch, its per-series steps and their reduce run on the executors and only their answer
comes to the driver (``distributed.py``), so a query reads months of every series with a
driver of the usual size."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from typing import Any

import pandas as pd

from query_dsl import Evaluator, Limits, Matrix
from spark_jobs.distributed import Distributor
from spark_jobs.history import ParquetSource

__all__ = ["analyze", "configure", "evaluator", "run_query"]


def _ms(text: str) -> int:
    return int(text) if text.isdigit() else int(datetime.fromisoformat(text).timestamp() * 1000)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", required=True, help="raw_ingest's Parquet root (file:// or hdfs://)")
    parser.add_argument("--query", required=True, help="a query of the language (docs/dsl.md)")
    parser.add_argument("--start", required=True, help="epoch ms or ISO 8601 (the fetch default range)")
    parser.add_argument("--end", required=True, help="epoch ms or ISO 8601")
    parser.add_argument("--step", type=int, default=60, help="bucket seconds of fetch(resolution=auto)")
    parser.add_argument("--output", required=True, help="where to write the result")
    parser.add_argument("--format", choices=["parquet", "csv"], default="parquet", help="the output's format")


def evaluator(spark: Any, path: str, start_ms: int, end_ms: int, step_s: int = 60) -> Evaluator:
    """An evaluator of the language over the Parquet history under ``path`` (its
    ``warnings`` say why parts of an answer are empty, as the query API's do)."""
    source = ParquetSource(spark, path, step_s)
    now_ms = int(time.time() * 1000)
    limits = Limits(max_series=10_000_000, max_points=2_000_000_000, timeout_s=3600, max_bytes=1 << 40)
    return Evaluator(
        source,
        now_ms=now_ms,
        start_ms=start_ms,
        end_ms=end_ms,
        limits=limits,
        delegate=Distributor(source, now_ms=now_ms, start_ms=start_ms, end_ms=end_ms, limits=limits),
    )


def analyze(
    spark: Any, path: str, query: str, start_ms: int, end_ms: int, step_s: int = 60
) -> Matrix | float:
    return evaluator(spark, path, start_ms, end_ms, step_s).evaluate(query)


def _long_form(result: Matrix | float) -> pd.DataFrame:
    if not isinstance(result, Matrix):
        return pd.DataFrame({"value": [result]})
    keys = result.series_keys()
    frame = pd.DataFrame(result.values, index=keys, columns=result.timestamps).stack(future_stack=True)
    frame = frame.rename_axis(["series", "ts_ms"]).reset_index(name="value")
    return frame


def run_query(spark: Any, args: argparse.Namespace) -> int:
    """Evaluate, say why parts of the answer are empty (stderr), write it, say what was written."""
    language = evaluator(spark, args.input, _ms(args.start), _ms(args.end), args.step)
    result = language.evaluate(args.query)
    for warning in language.warnings:
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    rows = _long_form(result)
    frame = spark.createDataFrame(rows)
    writer = frame.coalesce(1).write.mode("overwrite")
    (writer.option("header", True).csv(args.output) if args.format == "csv" else writer.parquet(args.output))
    shape = f"{len(result)} series" if isinstance(result, Matrix) else "a number"
    print(
        f"wrote {len(rows)} rows ({shape}, {int(rows['value'].notna().sum())} values) to {args.output}",
        flush=True,
    )
    return 0
