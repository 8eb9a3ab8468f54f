"""``raw_ingest --kafka`` on the real things: a Kafka cluster of three brokers (replication 3,
``min.insync.replicas`` 2) and the session's Spark standalone cluster, the job in its own
process (``artimon spark --master spark://...``, the connector's jars added by the command).
Its Spark worker is killed in the middle of a micro-batch, then a broker is killed while the
rest is read; every (series, time) produced must be in the Parquet history exactly once,
replayed records and a foreign record on the topic included."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from artimon.servers import KafkaCluster, SparkCluster
from bookkeeper.ground import decode_sample_batch, encode_sample_batch
from spark_jobs.testing import item_batch

pytestmark = [pytest.mark.slow, pytest.mark.spark]

TOPIC = "artimon-samples"
START_MS = 1_700_000_040_000 // 60_000 * 60_000
NAMES = [f"app.metric{n}" for n in range(10)]


@pytest.fixture(scope="module")
def kafka3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("kafka3"), brokers=3, heap="256m") as cluster:
        yield cluster


def _batch(endpoint: int, round_index: int, variables: int) -> tuple[bytes, dict[str, str]]:
    round_ms = START_MS + round_index * 60_000
    batch = item_batch(endpoint, round_ms, variables, round_index, NAMES)
    headers = {
        "artimon.endpoint": f"10.0.0.{endpoint}:1:u",
        "artimon.round": str(round_ms),
        "artimon.agent": "a1",
    }
    return encode_sample_batch(batch), headers


def _produce(cluster: KafkaCluster, endpoints: int, rounds: int, variables: int) -> set[tuple[str, int]]:
    """Every endpoint's rounds onto the topic, the first round published twice (an agent's
    replay), and one foreign record; the (series, round time) pairs produced."""
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True}
    )
    produced: set[tuple[str, int]] = set()
    for round_index in [*range(rounds), 0]:
        for endpoint in range(endpoints):
            body, headers = _batch(endpoint, round_index, variables)
            record_headers = [(name, value.encode()) for name, value in headers.items()]
            producer.produce(TOPIC, body, key=headers["artimon.endpoint"], headers=record_headers)
            producer.poll(0)
            keys = decode_sample_batch(body).series_keys()
            produced.update((key, int(headers["artimon.round"])) for key in keys)
    producer.produce(TOPIC, b"not a sample batch", key=b"foreign")
    assert producer.flush(60) == 0, "the topic did not take every record"
    return produced


def test_killed_executor_and_broker_lose_and_double_nothing(
    spark: Any, spark_cluster: SparkCluster, kafka3: KafkaCluster, tmp_path: Path, wait: Callable[..., None]
) -> None:
    kafka3.create_topic(TOPIC, 4)  # replication 3, min.insync.replicas 2 (the cluster's defaults)
    produced = _produce(kafka3, endpoints=50, rounds=4, variables=1000)
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "parquet"
    command = [sys.executable, "-m", "artimon", "spark", "--master", spark_cluster.master_url]
    command += ["--conf", "spark.executor.memory=768m", "raw_ingest", "--kafka", kafka3.bootstrap_servers]
    command += ["--topic", TOPIC, "--output", f"file://{output}", "--checkpoint", str(checkpoint)]
    command += ["--once", "--max-records", "50"]  # 251 records: six micro-batches
    log_path = tmp_path / "raw_ingest.log"
    with open(log_path, "wb") as log:
        job = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            # batch 1 started (its offsets written) and not committed: the kill lands mid-batch
            wait(lambda: (checkpoint / "offsets" / "1").exists() or job.poll() is not None, 300, "batch 1")
            spark_cluster.kill_worker()
            assert not (checkpoint / "commits" / "1").exists(), "batch 1 committed before the kill"
            spark_cluster.start_worker()
            # a broker killed while the rest is read: its partitions' leaders move to the others
            wait(lambda: (checkpoint / "offsets" / "3").exists() or job.poll() is not None, 300, "batch 3")
            kafka3.kill(1)
            assert not (checkpoint / "commits" / "3").exists(), "batch 3 committed before the kill"
            assert job.wait(timeout=300) == 0, log_path.read_text()[-3000:]
        finally:
            if job.poll() is None:
                job.kill()
    rows = spark.read.parquet(f"file://{output}").selectExpr("series", "unix_millis(ts) AS ts").toPandas()
    history = Counter(zip(rows["series"], rows["ts"].astype(int), strict=True))
    print(f"produced {len(produced)} samples (a round twice, a foreign record); history {len(rows)} rows")
    assert set(history) == produced
    assert len(rows) == len(produced), [pair for pair, seen in history.items() if seen > 1][:5]
