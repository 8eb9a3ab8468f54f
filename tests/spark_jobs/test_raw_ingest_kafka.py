"""``raw_ingest --kafka`` on the real things: a Kafka cluster of three brokers (replication 3,
``min.insync.replicas`` 2) and the session's Spark standalone cluster, the job on the session
itself. Its executor is SIGKILLed in the middle of a micro-batch, then a broker while the rest
is read; every (series, time) produced must be in the Parquet history exactly once, replayed
records, a foreign record and a record altered after its integrity stamp on the topic
included. The job reports to a polling agent's round ledger (``--ledger``) the rounds it
stored: a round is complete there once VHMS (told by the test) and the history hold it."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from artimon.servers import KafkaCluster
from bookkeeper.ground import decode_sample_batch, encode_sample_batch
from collector_agent import STAMP_HEADER, MonitorServer, RoundLedger, event_checksum
from spark_jobs.testing import item_batch

pytestmark = [pytest.mark.slow, pytest.mark.spark]

TOPIC = "artimon-samples"
START_MS = 1_700_000_040_000 // 60_000 * 60_000
NAMES = [f"app.metric{n}" for n in range(10)]
ENDPOINTS, ROUNDS, VARIABLES = 50, 4, 1000
ALTERED = ENDPOINTS  # an endpoint whose one record is altered on the topic after its stamp


@pytest.fixture(scope="module")
def kafka3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("kafka3"), brokers=3, heap="256m") as cluster:
        yield cluster


def endpoint_key(endpoint: int) -> str:
    return f"10.0.0.{endpoint}:1:u"


def round_ms(round_index: int) -> int:
    return START_MS + round_index * 60_000


def stamped(endpoint: int, round_index: int) -> tuple[bytes, dict[str, str]]:
    """A round of an endpoint as a polling agent publishes it: the batch, stamped."""
    body = encode_sample_batch(item_batch(endpoint, round_ms(round_index), VARIABLES, round_index, NAMES))
    headers = {"artimon.endpoint": endpoint_key(endpoint), "artimon.round": str(round_ms(round_index))}
    headers["artimon.agent"] = "a1"
    headers[STAMP_HEADER] = f"{event_checksum(body, headers):08x}"
    return body, headers


def produce(cluster: KafkaCluster) -> set[tuple[str, int]]:
    """Every endpoint's rounds onto the topic, the first round published twice (an agent's
    replay), a foreign record and a record altered after its stamp; the (series, round time)
    pairs that must be stored."""
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True}
    )

    def send(body: bytes, headers: dict[str, str]) -> None:
        record_headers = [(name, value.encode()) for name, value in headers.items()]
        producer.produce(TOPIC, body, key=headers["artimon.endpoint"], headers=record_headers)
        producer.poll(0)

    produced: set[tuple[str, int]] = set()
    for round_index in [*range(ROUNDS), 0]:
        for endpoint in range(ENDPOINTS):
            body, headers = stamped(endpoint, round_index)
            send(body, headers)
            produced.update((key, round_ms(round_index)) for key in decode_sample_batch(body).series_keys())
    body, headers = stamped(ALTERED, ROUNDS - 1)
    send(body.replace(b"app.metric3", b"app.metric4", 1), headers)
    producer.produce(TOPIC, b"not a sample batch", key=b"foreign")
    assert producer.flush(60) == 0, "the topic did not take every record"
    return produced


@pytest.fixture
def ledger() -> Iterator[tuple[RoundLedger, str]]:
    """The polling agent's round ledger, served on its monitoring port: every round of every
    endpoint expected, awaited by VHMS and the history."""
    rounds = RoundLedger()
    rounds.declare("vhms", "sink k1 (channel c1)")
    rounds.declare("history", "raw_ingest")
    for round_index in range(ROUNDS):
        for endpoint in range(ENDPOINTS):
            rounds.expect(round_ms(round_index), endpoint_key(endpoint), VARIABLES)
    rounds.expect(round_ms(ROUNDS - 1), endpoint_key(ALTERED), VARIABLES)
    server = MonitorServer(dict, "a1", port=0, ledger=rounds)
    server.start()
    try:
        yield rounds, f"http://127.0.0.1:{server.port}/ledger"
    finally:
        server.stop()


def executors(app_id: str) -> list[int]:
    """The PIDs of the executor JVMs of Spark application ``app_id`` on this machine."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # not a process, or gone
            continue
        executor = any(part.endswith(b"CoarseGrainedExecutorBackend") for part in command)
        if executor and app_id.encode() in command:
            found.append(int(entry.name))
    return found


def test_killed_executor_and_broker_lose_and_double_nothing(
    spark: Any,
    kafka3: KafkaCluster,
    ledger: tuple[RoundLedger, str],
    tmp_path: Path,
    wait: Callable[..., None],
) -> None:
    from spark_jobs import raw_ingest  # pyspark's import is slow: only here

    if spark.sparkContext.master.startswith("local"):
        pytest.skip("no executor of its own to kill: ARTIMON_TEST_SPARK=local")
    rounds, url = ledger
    kafka3.create_topic(TOPIC, 4)  # replication 3, min.insync.replicas 2 (the cluster's defaults)
    produced = produce(kafka3)
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "parquet"
    refused: list[int] = []
    job = threading.Thread(
        target=lambda: refused.append(
            raw_ingest.ingest_once(
                spark,
                None,
                output.as_uri(),
                checkpoint.as_uri(),
                kafka=kafka3.bootstrap_servers,
                topic=TOPIC,
                max_records=63,  # 252 records: four or five micro-batches (split by partition)
                ledger=[url],
            )
        ),
        daemon=True,
    )
    job.start()
    # batch 1 started (its offsets written) and not committed: the kill lands mid-batch
    wait(lambda: (checkpoint / "offsets" / "1").exists() or not job.is_alive(), 300, "batch 1")
    (executor,) = executors(spark.sparkContext.applicationId)
    os.kill(executor, signal.SIGKILL)  # the worker's master starts another executor
    assert not (checkpoint / "commits" / "1").exists(), "batch 1 committed before the kill"
    # a broker killed while the rest is read: its partitions' leaders move to the others
    wait(lambda: (checkpoint / "offsets" / "2").exists() or not job.is_alive(), 300, "batch 2")
    kafka3.kill(1)
    assert not (checkpoint / "commits" / "2").exists(), "batch 2 committed before the kill"
    job.join(300)
    assert refused == [1], "the job failed or did not end: see its log above"

    rows = spark.read.parquet(output.as_uri()).selectExpr("series", "unix_millis(ts) AS ts").toPandas()
    history = Counter(zip(rows["series"], rows["ts"].astype(int), strict=True))
    assert set(history) == produced
    assert len(rows) == len(produced) == ENDPOINTS * ROUNDS * VARIABLES, [
        pair for pair, seen in history.items() if seen > 1
    ][:5]

    # the ledger: the history holds every batch but the altered one, VHMS none yet; then all
    view = httpx.get(url, timeout=10).json()
    assert [entry["state"] for entry in view["rounds"]] == ["waiting"] * ROUNDS
    assert [entry["committed"] for entry in view["rounds"]] == [
        {"history": ENDPOINTS * VARIABLES, "vhms": 0}
    ] * ROUNDS
    for round_index in range(ROUNDS):
        for endpoint in range(ENDPOINTS):
            rounds.commit("vhms", round_ms(round_index), endpoint_key(endpoint), VARIABLES)
    rounds.commit("vhms", round_ms(ROUNDS - 1), endpoint_key(ALTERED), VARIABLES)
    last, *earlier = httpx.get(url, timeout=10).json()["rounds"]  # newest first
    assert [entry["state"] for entry in earlier] == ["complete"] * (ROUNDS - 1)
    assert last["state"] == "waiting"
    assert last["waiting"] == [
        {"terminal": "history", "endpoints": 1, "samples": VARIABLES, "where": ["raw_ingest"]}
    ]
