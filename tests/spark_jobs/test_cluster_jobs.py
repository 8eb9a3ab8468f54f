"""Spark jobs on the standalone cluster, each from its own process (this one's SparkSession is
the local one): ``analyze`` over 100K series with a driver too small to collect them, and
``raw_ingest`` whose worker is killed in the middle of a micro-batch."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from artimon.servers import SparkCluster
from bookkeeper.ground import LandingWriter, encode_sample_batch, encode_trailer
from spark_jobs.testing import item_batch, write_counters

pytestmark = pytest.mark.slow

SERIES = 100_000
MINUTES = 3
DCS = 4
START_MS = 1_700_000_040_000 // 60_000 * 60_000

# Run in a process of its own with a capped driver: the old path (the selected series
# collected to the driver through ParquetSource) must fail, analyze must answer; the
# driver of a spark:// master on loopback listens on loopback only.
CAPPED = textwrap.dedent(
    """
    import ipaddress, json, os, sys
    from bookkeeper.testing import listening
    from query_dsl import Evaluator, Limits
    from spark_jobs import analyze, spark_session
    from spark_jobs.history import ParquetSource

    master, path, query = sys.argv[1:4]
    start, end = int(sys.argv[4]), int(sys.argv[5])
    spark = spark_session(master, "capped-driver", conf={
        "spark.driver.maxResultSize": "2m", "spark.executor.memory": "768m"})
    try:
        limits = Limits(max_series=10_000_000, max_points=10**9, timeout_s=600)
        Evaluator(ParquetSource(spark, path), start_ms=start, end_ms=end, limits=limits).evaluate(query)
        collected = "answered"
    except Exception as exc:
        collected = str(exc)
    result = analyze.analyze(spark, path, query, start, end)
    driver = [x.host for x in listening(os.getpid())]  # the driver's JVM is a child of this process
    print(json.dumps({"collected": collected, "keys": result.series_keys(), "driver": driver,
                      "timestamps": result.timestamps.tolist(), "values": result.values.tolist()}))
    spark.stop()
    """
)


def test_analyze_of_100k_series_answers_where_collecting_them_fails(
    spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    write_counters(tmp_path / "history", SERIES, MINUTES, START_MS, DCS)
    query = 'fetch("app.requests") | map(delta, 2m) | reduce(sum, by=[dc])'
    end_ms = START_MS + MINUTES * 60_000
    command = [sys.executable, "-c", CAPPED, spark_cluster.master_url, f"file://{tmp_path / 'history'}"]
    command += [query, str(START_MS), str(end_ms)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert "spark.driver.maxResultSize" in answer["collected"], answer["collected"][:500]
    assert answer["driver"] and all(ipaddress.ip_address(host).is_loopback for host in answer["driver"])
    assert answer["keys"] == [f"app.requests{{dc=dc{d}}}" for d in range(DCS)]
    assert answer["timestamps"] == [START_MS + m * 60_000 for m in range(MINUTES)]
    index = np.arange(SERIES)
    for d, row in enumerate(answer["values"]):
        steps = float((index[index % DCS == d] % 7).sum())
        assert row == [0.0] + [steps] * (MINUTES - 1)


def _land(directory: Path, files: int, endpoints: int, variables: int) -> int:
    """``files`` landing files of one round each, ``endpoints`` batches of ``variables``."""
    names = [f"app.metric{n}" for n in range(10)]
    for minute in range(files):
        round_ms = START_MS + minute * 60_000
        writer = LandingWriter(directory / f"raw-{minute}.avro")
        block = []
        for e in range(endpoints):
            batch = item_batch(e, round_ms, variables, minute, names)
            block.append(encode_sample_batch(batch) + encode_trailer(round_ms, f"10.0.0.{e}:1:u", "a1"))
        writer.write_block(block)
        writer.close()
    return files * endpoints * variables


@pytest.mark.spark
def test_a_worker_killed_mid_batch_loses_and_doubles_nothing(
    spark: Any, spark_cluster: SparkCluster, tmp_path: Path, wait: Callable[..., None]
) -> None:
    landing, checkpoint, output = tmp_path / "landing", tmp_path / "checkpoint", tmp_path / "parquet"
    landing.mkdir()
    samples = _land(landing, files=2, endpoints=50, variables=1000)
    command = [sys.executable, "-m", "artimon", "spark", "--master", spark_cluster.master_url]
    command += ["--conf", "spark.executor.memory=768m", "raw_ingest", "--landing", str(landing)]
    command += ["--output", f"file://{output}", "--checkpoint", str(checkpoint), "--once", "--max-files", "1"]
    with open(tmp_path / "raw_ingest.log", "wb") as log:
        job = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            # batch 1 started (its offsets written) and not committed: the kill lands mid-batch
            wait(lambda: (checkpoint / "offsets" / "1").exists() or job.poll() is not None, 240, "batch 1")
            spark_cluster.kill_worker()
            assert not (checkpoint / "commits" / "1").exists(), "batch 1 committed before the kill"
            spark_cluster.start_worker()
            assert job.wait(timeout=240) == 0, (tmp_path / "raw_ingest.log").read_text()[-3000:]
        finally:
            if job.poll() is None:
                job.kill()
    assert (checkpoint / "commits" / "1").exists()  # both batches committed
    rows = spark.read.parquet(f"file://{output}")
    assert rows.count() == samples
    assert rows.select("series", "ts").distinct().count() == samples
