"""Landing files to Parquet with Spark's ``raw_ingest`` on ``local[2]``: samples per second
and Parquet bytes per sample, with the history on ``file://`` and on a real single-node
``hdfs://`` (``HdfsServer``, started here) side by side in one run, the same landing files
for both; and beside them ``raw_ingest --kafka``, the same batches read from a topic of four
partitions on a single-node Kafka (``KafkaCluster``, started here) into ``file://``, with its
time as a ratio of the landing files' (``--fs file`` leaves HDFS out, ``--fs hdfs`` Kafka).
Prints a table, writes results/spark_bench.json.

Targets: >= 100K samples/s on this machine (1.5M a minute with margin) and <= 4 bytes per
sample on disk (Prometheus stores 1 to 2), on both (issue 9); ``hdfs://`` within 1.5x the
time of ``file://`` (issue 18).

Data: ``--samples`` (default 15M, ten minutes of Artimon's load) as sample batches of 1,500
variables (a batch per endpoint and round), 1,000 endpoints a round, counters growing by
small steps, as the raw sink lands them: a landing file per round, so the default
``--max-files`` makes the ten rounds one micro-batch, as a ten-minute ``--interval`` would.
The time counts the job from its start in a fresh session (Python workers, caches and JIT
cold), not the JVM's start; ``--quick`` (one round) is mostly that start. The machine's load
average before and after is in the row: other work on the two cores slows the job.

``--only analyze`` (or the default, both): ``analyze`` of a query with a map and a reduce
over a synthetic hour of 10K and then 100K counters (``spark_jobs.testing``), in one warm
session (a small run first starts its Python workers), on ``local[2]`` or with ``--cluster``
on a standalone master and worker of its own: seconds, series per second and how the time
per series grows from 10K to 100K (target: no worse than linearly, a ratio <= 1.2 allowing
for noise). Written to results/spark_analyze_bench.json.

Run: python benchmarks/spark_bench.py [--quick] [--only ingest|analyze] [--fs file|hdfs] [--cluster]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from _report import progress, report
from confluent_kafka import Producer

from artimon.servers import HdfsServer, KafkaCluster, SparkCluster, spark_kafka_conf
from bookkeeper.batch import SampleBatch
from bookkeeper.ground import LandingWriter, encode_sample_batch, encode_trailer
from spark_jobs import analyze, raw_ingest
from spark_jobs.session import spark_session
from spark_jobs.testing import write_counters

VARIABLES = 1500
ROUND = 1_700_000_000_000
ANALYZE_QUERY = 'fetch("app.requests") | map(rate, 5m) | reduce(sum, by=[dc])'
ANALYZE_SERIES = (10_000, 100_000)
ANALYZE_MINUTES = 60
TOPIC = "artimon-samples"


def rounds(samples: int) -> Iterator[list[tuple[bytes, int, str]]]:
    """Each round's records: (sample batch, round time, endpoint), 1,000 endpoints a round."""
    batches = samples // VARIABLES
    endpoints = min(1000, batches)
    rng = np.random.default_rng(9)
    label_sets = [f"item={i}" for i in range(VARIABLES)]
    names = [f"app.metric{n}" for n in range(30)]
    name_ids = (np.arange(VARIABLES) % 30).astype(np.int32)
    base = rng.integers(0, 10**6, size=(endpoints, VARIABLES))
    for r in range(batches // endpoints):
        records = []
        for e in range(endpoints):
            values = base[e] + r * rng.integers(0, 50, size=VARIABLES)
            batch = SampleBatch(
                context=f"app{e}",
                snapshot_ms=ROUND + r * 60_000,
                common_labels={
                    "context": f"app{e}",
                    "host": f"h{e}",
                    "dc": f"dc{e % 3}",
                    "rack": f"r{e % 40}",
                },
                names=names,
                label_sets=label_sets,
                name_ids=name_ids,
                label_set_ids=np.arange(VARIABLES, dtype=np.int32),
                types=np.zeros(VARIABLES, dtype=np.uint8),
                values=values.astype(np.int64),
                timestamps=np.full(VARIABLES, ROUND + r * 60_000 - 500, dtype=np.int64),
            )
            records.append((encode_sample_batch(batch), ROUND + r * 60_000, f"10.0.{e // 250}.{e % 250}:1:u"))
        yield records


def land(directory: Path, samples: int, kafka: KafkaCluster | None) -> int:
    """A landing file per round, as the raw sink writes them, and with ``kafka`` the same
    batches on its topic, as the Kafka sink publishes them; the samples written."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"}) if kafka else None
    written = 0
    for r, records in enumerate(rounds(samples)):
        writer = LandingWriter(directory / f"raw-{r}.avro")
        for start in range(0, len(records), 100):
            block = records[start : start + 100]
            writer.write_block(
                [body + encode_trailer(round_ms, endpoint, "a1") for body, round_ms, endpoint in block]
            )
        writer.close()
        for body, round_ms, endpoint in records if producer else ():
            headers = [
                ("artimon.round", str(round_ms)),
                ("artimon.endpoint", endpoint),
                ("artimon.agent", "a1"),
            ]
            producer.produce(TOPIC, body, key=endpoint, headers=headers)
            producer.poll(0)
        written += len(records) * VARIABLES
        progress(f"landed round {r + 1}")
    if producer is not None and producer.flush(120) != 0:
        raise RuntimeError("the topic did not take every batch")
    return written


def parquet_bytes(spark: Any, uri: str) -> int:
    """The bytes of the Parquet files under ``uri``, through Hadoop's API (any file system)."""
    jvm, conf = spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(uri)
    files = path.getFileSystem(conf).listFiles(path, True)
    total = 0
    while files.hasNext():
        status = files.next()
        if status.getPath().getName().endswith(".parquet"):
            total += status.getLen()
    return int(total)


def ingest(
    root: str,
    landing: Path,
    samples: int,
    landing_bytes: int,
    hdfs_conf: Path | None = None,
    kafka: str | None = None,
) -> dict[str, Any]:
    """One ``raw_ingest --once`` (of the landing files, or of ``kafka``'s topic) into
    ``root`` in a fresh session; its row of the table."""
    if hdfs_conf is not None:  # the Hadoop way: Spark's JVM reads the cluster's client settings
        os.environ["HADOOP_CONF_DIR"] = str(hdfs_conf)
    # the connector in every session: pyspark keeps its first JVM, whose class path is fixed at launch
    spark = spark_session("local[2]", "artimon-spark-bench", conf=spark_kafka_conf())
    try:
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        source = {"landing": None, "kafka": kafka, "topic": TOPIC} if kafka else {"landing": str(landing)}
        raw_ingest.ingest_once(spark, output=f"{root}/parquet", checkpoint=f"{root}/checkpoint", **source)
        seconds = time.perf_counter() - started
        load_after = os.getloadavg()[0]
        size = parquet_bytes(spark, f"{root}/parquet")
    finally:
        spark.stop()
        os.environ.pop("HADOOP_CONF_DIR", None)
    return {
        "case": f"raw_ingest --once{' --kafka' if kafka else ''}, local[2], {samples:,} samples, "
        f"{root.partition(':')[0]}://",
        "seconds": seconds,
        "samples/s": samples / seconds,
        "target_rate": ">= 100K/s",
        "rate_met": samples / seconds >= 100_000,
        "parquet_bytes/sample": size / samples,
        "target_size": "<= 4",
        "size_met": size / samples <= 4,
        "landing_bytes/sample": landing_bytes / samples,
        "load_before": load_before,
        "load_after": load_after,
    }


def bench_ingest(samples_wanted: int, only_fs: str | None) -> None:
    work = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    hdfs: HdfsServer | None = None
    kafka = KafkaCluster(work / "kafka", partitions=4) if only_fs != "hdfs" else None
    try:
        if kafka is not None:
            kafka.start().create_topic(TOPIC)
        landing = work / "landing"
        landing.mkdir()
        samples = land(landing, samples_wanted, kafka)
        landing_bytes = sum(p.stat().st_size for p in landing.glob("*.avro"))
        rows = []
        if only_fs != "hdfs":
            rows.append(ingest(f"file://{work}/history", landing, samples, landing_bytes))
        if kafka is not None:
            rows.append(
                ingest(
                    f"file://{work}/kafka-history",
                    landing,
                    samples,
                    landing_bytes,
                    kafka=kafka.bootstrap_servers,
                )
            )
            ratio = rows[-1]["seconds"] / rows[0]["seconds"]
            rows[-1]["kafka/landing time"] = ratio
        if only_fs != "file":
            hdfs = HdfsServer(work / "hdfs").start()
            progress(f"HDFS ready at {hdfs.uri} in {hdfs.started_in_s:.1f} s")
            rows.append(ingest(f"{hdfs.uri}/artimon/history", landing, samples, landing_bytes, hdfs.conf_dir))
        if only_fs is None:
            ratio = rows[-1]["seconds"] / rows[0]["seconds"]
            rows[-1].update({"hdfs/file time": ratio, "target_ratio": "<= 1.5", "ratio_met": ratio <= 1.5})
        report("spark_bench", rows, list(dict.fromkeys(key for row in rows for key in row)))
    finally:
        if kafka is not None:
            kafka.stop()
        if hdfs is not None:
            hdfs.stop()
        shutil.rmtree(work, ignore_errors=True)


def bench_analyze(on_cluster: bool) -> None:
    """analyze at each of ANALYZE_SERIES in one warm session, side by side."""
    work = Path(tempfile.mkdtemp(prefix="spark-analyze-bench-"))
    cluster = SparkCluster(work / "cluster") if on_cluster else None
    try:
        master = cluster.start().master_url if cluster else "local[2]"
        spark = spark_session(master, "artimon-analyze-bench", conf={"spark.executor.memory": "1g"})
        end_ms = ROUND + ANALYZE_MINUTES * 60_000
        write_counters(work / "warm", 1000, 10, ROUND)
        analyze.analyze(spark, f"file://{work / 'warm'}", ANALYZE_QUERY, ROUND, ROUND + 600_000)
        rows = []
        for series in ANALYZE_SERIES:
            history = work / f"history-{series}"
            write_counters(history, series, ANALYZE_MINUTES, ROUND)
            progress(f"analyze over {series:,} series")
            load_before = os.getloadavg()[0]
            started = time.perf_counter()
            result = analyze.analyze(spark, f"file://{history}", ANALYZE_QUERY, ROUND, end_ms)
            seconds = time.perf_counter() - started
            assert not isinstance(result, float) and len(result) == 4  # one series per dc
            rows.append(
                {
                    "case": f"analyze, {master}, {series:,} series x {ANALYZE_MINUTES} minutes",
                    "seconds": seconds,
                    "series/s": series / seconds,
                    "samples/s": series * ANALYZE_MINUTES / seconds,
                    "load_before": load_before,
                    "load_after": os.getloadavg()[0],
                }
            )
        spark.stop()
        per_series = [row["seconds"] / series for row, series in zip(rows, ANALYZE_SERIES, strict=True)]
        for row, cost in zip(rows, per_series, strict=True):
            row["time/series vs 10K"] = cost / per_series[0]
        rows[-1]["target"] = "<= 1.2 (linear)"
        rows[-1]["met"] = per_series[-1] / per_series[0] <= 1.2
        report("spark_analyze_bench", rows, list(rows[-1]))
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="1.5M samples")
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--only", choices=["ingest", "analyze"], default=None)
    parser.add_argument("--fs", choices=["file", "hdfs"], default=None, help="ingest into one only")
    parser.add_argument("--cluster", action="store_true", help="analyze on a standalone master and worker")
    args = parser.parse_args()
    if args.only != "analyze":
        bench_ingest(args.samples or (1_500_000 if args.quick else 15_000_000), args.fs)
    if args.only != "ingest":
        bench_analyze(args.cluster)


if __name__ == "__main__":
    main()
