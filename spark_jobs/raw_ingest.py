"""``raw_ingest``: the landing directory to Parquet, partitioned by date and hour.

Structured Streaming reads the landing files (Avro, through
``org.apache.spark.sql.avro.AvroFileFormat``: the ``avro`` short name is not registered in
the pip wheel; only ``*.avro``, never the ``.avro.tmp`` being written), turns each sample
batch into a row per sample, drops the duplicates an agent's replay brings (same series and
time, within ``--watermark``), and appends Parquet under ``--output`` (``file://`` by
default, ``hdfs://`` in production) with a checkpoint, which makes the output exactly-once
across restarts. ``--once`` processes what is there and exits (``trigger(availableNow)``).
A landing file damaged after it was closed (cut short, overwritten) is read up to the
damage; Spark logs a warning naming it and the stream goes on with the other files.
Processed landing files are kept, deleted or archived (``--processed``) by Spark's file
source cleanup.
"""

from __future__ import annotations

import argparse
from typing import Any

from spark_jobs.explode import explode_batches
from spark_jobs.schema import LANDING, SAMPLES

__all__ = ["configure", "ingest_once", "run_query", "start"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--landing", required=True, help="the raw sink's landing directory")
    parser.add_argument("--output", required=True, help="Parquet root: file:///... or hdfs://...")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (same filesystem kind)")
    parser.add_argument("--once", action="store_true", help="process what is there and exit")
    parser.add_argument("--watermark", default="15 minutes", help="how late a replayed duplicate may come")
    parser.add_argument("--interval", default="30 seconds", help="trigger interval when streaming")
    parser.add_argument("--max-files", type=int, default=10, help="landing files per micro-batch")
    parser.add_argument("--processed", choices=["keep", "delete", "archive"], default="keep")
    parser.add_argument("--archive-dir", default=None, help="with --processed archive")


def start(spark: Any, args: argparse.Namespace) -> Any:
    """Start the streaming query; returns it (``awaitTermination`` to wait)."""
    reader = (
        spark.readStream.format("org.apache.spark.sql.avro.AvroFileFormat")
        .schema(LANDING)
        .option("pathGlobFilter", "*.avro")
        .option("maxFilesPerTrigger", args.max_files)
        .option("ignoreCorruptFiles", "true")
    )
    if args.processed != "keep":
        reader = reader.option("cleanSource", args.processed)
        if args.processed == "archive":
            if not args.archive_dir:
                raise ValueError("--processed archive needs --archive-dir")
            reader = reader.option("sourceArchiveDir", args.archive_dir)
    samples = reader.load(args.landing).mapInPandas(explode_batches, SAMPLES)
    deduplicated = samples.withWatermark("ts", args.watermark).dropDuplicatesWithinWatermark(["series", "ts"])
    writer = (
        deduplicated.writeStream.format("parquet")
        .option("compression", "zstd")
        .option("checkpointLocation", args.checkpoint)
        .partitionBy("date", "hour")
        .outputMode("append")
    )
    writer = writer.trigger(availableNow=True) if args.once else writer.trigger(processingTime=args.interval)
    return writer.start(args.output)


def run_query(spark: Any, args: argparse.Namespace) -> int:
    query = start(spark, args)
    query.awaitTermination()
    return 0


def ingest_once(spark: Any, landing: str, output: str, checkpoint: str, **options: Any) -> None:
    """Process what the landing directory holds and return (``--once``), with the command's
    defaults for every other option: for tests, benchmarks and scripts."""
    parser = argparse.ArgumentParser()
    configure(parser)
    args = parser.parse_args(["--landing", landing, "--output", output, "--checkpoint", checkpoint, "--once"])
    for key, value in options.items():
        setattr(args, key, value)
    start(spark, args).awaitTermination()
