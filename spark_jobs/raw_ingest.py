"""``raw_ingest``: the landing directory, or the agents' Kafka topic, to Parquet, partitioned
by date and hour.

With ``--kafka BOOTSTRAP`` (a site with Kafka between its agents) it reads the topic
(``--topic``) with Spark's own Kafka source, offsets kept in the checkpoint
(``kafka_records.py``; the session needs the connector's jars, which ``artimon spark`` and
``artimon up`` add); ``--max-records`` caps a micro-batch. Without it, Structured Streaming
reads the landing files (Avro, through
``org.apache.spark.sql.avro.AvroFileFormat``: the ``avro`` short name is not registered in
the pip wheel; only ``*.avro``, never the ``.avro.tmp`` being written), groups the landing
records by endpoint (their framework labels) to drop the samples an agent's replay brings
again (same series and time, within ``--watermark``: ``dedupe.py``, which remembers per
endpoint the shapes of the rounds it saw rather than each sample), turns each record into a
row per sample sorted by series and time (``explode.py``), and appends Parquet under
``--output`` (``file://`` by default, ``hdfs://`` in production) with a checkpoint, which
makes the output exactly-once across restarts. ``--once`` processes what is there and exits
(``trigger(availableNow)``). A landing file damaged after it was closed (cut short,
overwritten) is read up to the damage; Spark logs a warning naming it and the stream goes on
with the other files. A record whose bytes are not those its agent stamped (``integrity.py``)
is logged and counted (the progress's observed metrics ``integrity``:
``ChecksumMismatchCount``), never stored. Processed landing files are kept, deleted or archived
(``--processed``) by Spark's file source cleanup. Either way the records go through the
same dedupe and explode.

On ``hdfs://`` the job outlives its file system's bad moments (``history_fs.py``): while the
NameNode is in safe mode or a daemon is down it logs a line per attempt and starts the query
again from its checkpoint after a growing backoff (``--max-retries``); a permission denied
or a quota exceeded on the history path ends it with :class:`~spark_jobs.HistoryPathError`
naming the path, and the landing files (or the topic's records) stay for the next run.

With ``--ledger URL`` (repeatable: each agent that lands files here) the job reports the
landing files of each committed micro-batch to the agents' round ledgers
(``ledger_report.py``), which then count those rounds' batches as stored in the history.

A micro-batch writes its own files, in which a series' samples of the batch lie side by
side: the longer the batch, the fewer bytes a sample takes (docs/spark.md), hence an
``--interval`` of minutes; the history lags VHMS by as much.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from spark_jobs.dedupe import dedupe_records
from spark_jobs.exceptions import HistoryPathError
from spark_jobs.explode import explode_batches
from spark_jobs.history_fs import run_with_retries
from spark_jobs.integrity import check_landed
from spark_jobs.kafka_records import kafka_records
from spark_jobs.ledger_report import http_sender, watch_commits
from spark_jobs.schema import CHECKED, DEDUPE_STATE, DEDUPED, GROUPED, KEPT, LANDED, SAMPLES

__all__ = [
    "INTEGRITY_METRICS",
    "PARQUET_OPTIONS",
    "checksum_mismatches",
    "configure",
    "ingest_once",
    "run_query",
    "start",
]

INTEGRITY_METRICS = "integrity"  # the observed metrics of a micro-batch's integrity check

# Rows come sorted by series and time (explode.py). Parquet's v2 pages delta-encode the
# sorted keys (DELTA_BYTE_ARRAY: each key is its prefix shared with the previous one plus
# the rest) where a dictionary would overflow its page with a day's million series and
# fall back to plain strings; the values compress better plain under zstd than through a
# dictionary of mostly distinct numbers. Measured in docs/spark.md.
PARQUET_OPTIONS = {
    "compression": "zstd",
    "parquet.writer.version": "v2",
    "parquet.enable.dictionary#series": "false",
    "parquet.enable.dictionary#value": "false",
}


def configure(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--landing", help="the raw sink's landing directory")
    source.add_argument(
        "--kafka", metavar="BOOTSTRAP", help="read the topic of these brokers (host:port,...)"
    )
    parser.add_argument("--topic", default="artimon-samples", help="with --kafka: the agents' topic")
    parser.add_argument(
        "--max-records", type=int, default=None, help="with --kafka: records per micro-batch at most"
    )
    parser.add_argument("--output", required=True, help="Parquet root: file:///... or hdfs://...")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (same filesystem kind)")
    parser.add_argument("--once", action="store_true", help="process what is there and exit")
    parser.add_argument("--watermark", default="15 minutes", help="how late a replayed duplicate may come")
    parser.add_argument("--interval", default="5 minutes", help="trigger interval when streaming")
    parser.add_argument("--max-files", type=int, default=30, help="landing files per micro-batch at most")
    parser.add_argument(
        "--processed",
        choices=["keep", "delete", "archive"],
        default="keep",
        help="what becomes of a landing file once it is in the history",
    )
    parser.add_argument("--archive-dir", default=None, help="with --processed archive")
    parser.add_argument(
        "--max-retries",
        type=int,
        default=20,
        help="restarts while HDFS is unavailable (safe mode, a daemon down)",
    )
    parser.add_argument("--max-backoff", type=float, default=60.0, help="seconds between restarts at most")
    parser.add_argument(
        "--ledger",
        action="append",
        default=[],
        metavar="URL",
        help="an agent's round ledger (http://host:port/ledger) told each committed landing file; repeatable",
    )


def local_uri(path: str) -> str:
    """A path without a scheme as a ``file://`` URI: the raw sink lands on the agent's own
    disk, where ``HADOOP_CONF_DIR``'s ``fs.defaultFS`` would send a bare path to HDFS. A
    landing directory elsewhere says so with its scheme (``hdfs://...``)."""
    return path if "://" in path else Path(path).resolve().as_uri()


def _landing_records(spark: Any, args: argparse.Namespace) -> Any:
    reader = (
        spark.readStream.format("org.apache.spark.sql.avro.AvroFileFormat")
        .schema(LANDED)
        .option("pathGlobFilter", "*.avro")
        .option("maxFilesPerTrigger", args.max_files)
        .option("ignoreCorruptFiles", "true")
    )
    if args.processed != "keep":
        reader = reader.option("cleanSource", args.processed)
        if args.processed == "archive":
            if not args.archive_dir:
                raise ValueError("--processed archive needs --archive-dir")
            reader = reader.option("sourceArchiveDir", local_uri(args.archive_dir))
    landed = reader.load(local_uri(args.landing)).withColumn("file", F.input_file_name())
    checked = landed.mapInArrow(check_landed, CHECKED).observe(
        INTEGRITY_METRICS, F.count("damage").alias("ChecksumMismatchCount")
    )
    return checked.where(F.col("damage").isNull())


def start(spark: Any, args: argparse.Namespace) -> Any:
    """Start the streaming query; returns it (``awaitTermination`` to wait)."""
    if args.kafka:
        records = kafka_records(spark, args.kafka, args.topic, args.max_records)
    else:
        records = _landing_records(spark, args)
    grouped = records.select(
        F.to_json(F.map_from_entries(F.array_sort(F.map_entries("common_labels")))).alias("group"),
        F.timestamp_millis(F.coalesce("round_ms", "snapshot_ms")).alias("event"),
        *(field.name for field in GROUPED.fields[2:]),
    ).withWatermark("event", args.watermark)
    deduplicated = grouped.groupBy("group").applyInPandasWithState(
        dedupe_records, DEDUPED, DEDUPE_STATE, "append", GroupStateTimeout.EventTimeTimeout
    )
    common_labels = F.from_json("group", "map<string,string>").alias("common_labels")
    samples = deduplicated.select(
        *(common_labels if name == "common_labels" else name for name in KEPT.fieldNames())
    ).mapInArrow(explode_batches, SAMPLES)
    writer = (
        samples.writeStream.format("parquet")
        .options(**PARQUET_OPTIONS)
        .option("checkpointLocation", args.checkpoint)
        .partitionBy("date", "hour")
        .outputMode("append")
    )
    writer = writer.trigger(availableNow=True) if args.once else writer.trigger(processingTime=args.interval)
    return writer.start(args.output)


def checksum_mismatches(query: Any) -> int:
    """Landing records ``query`` refused as not what their agent stamped, over its recent
    progress (Spark keeps the last ``spark.sql.streaming.numRecentProgressUpdates``)."""
    total = 0
    for progress in query.recentProgress:
        metrics = progress.observedMetrics.get(INTEGRITY_METRICS)
        total += metrics["ChecksumMismatchCount"] if metrics is not None else 0
    return total


def _run(spark: Any, args: argparse.Namespace, timeout: float | None = None) -> list[Any]:
    """The query until it ends, started again from its checkpoint while HDFS is unavailable;
    the queries started."""
    queries: list[Any] = []

    def attempt() -> None:
        queries.append(start(spark, args))
        queries[-1].awaitTermination(timeout)

    reporter = watch_commits(spark, args.checkpoint, http_sender(args.ledger)) if args.ledger else None
    try:
        run_with_retries(
            attempt,
            [args.output, args.checkpoint],
            max_retries=args.max_retries,
            max_backoff_s=args.max_backoff,
            progressed=lambda: bool(queries) and queries[-1].lastProgress is not None,
        )
    finally:
        if reporter is not None:
            reporter.close()  # a last report: the last batch's progress event may not have come yet
    return queries


def run_query(spark: Any, args: argparse.Namespace) -> int:
    try:
        _run(spark, args)
    except HistoryPathError as exc:
        print(exc, file=sys.stderr, flush=True)
        return 1
    return 0


def ingest_once(spark: Any, landing: str | None, output: str, checkpoint: str, **options: Any) -> int:
    """Process what the landing directory holds, or with ``landing`` None and
    ``kafka=BOOTSTRAP`` (``topic=``) what the topic holds, and return (``--once``), with the
    command's defaults for every other option: for tests, benchmarks and scripts. Returns how
    many landing records were refused by the integrity check."""
    parser = argparse.ArgumentParser()
    configure(parser)
    source = ["--landing", landing] if landing is not None else ["--kafka", options.pop("kafka")]
    args = parser.parse_args([*source, "--output", output, "--checkpoint", checkpoint, "--once"])
    for key, value in options.items():
        setattr(args, key, value)
    return sum(checksum_mismatches(query) for query in _run(spark, args))
