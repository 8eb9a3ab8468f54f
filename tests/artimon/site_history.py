"""The site's Parquet history as the site test reads it (``artimon.site.history_job``'s
output on the site's HDFS), from this machine (``198.18.0.254`` on the site's bridge)
through WebHDFS, so that no Spark session runs in the test's process (a pytest run has at
most one, and it is the session's shared one):

- :func:`caught_up`: whether the history job's last committed micro-batch read the topic to
  the ends given: its checkpoint's ``commits/<n>`` exists and ``offsets/<n>`` (a ``v1``
  line, the batch's metadata, then the Kafka source's offsets as JSON, topic -> partition
  -> next offset) reaches them;
- :func:`read_history`: the rows of the Parquet files the sink committed, those its
  ``_spark_metadata`` log lists (``add`` entries of the numbered files and of the
  ``<n>.compact`` ones, which hold the earlier entries too), as Spark's own reader takes
  them: never a file a failed task left beside them.

A module of its own (not the test file) so that the test file stays the accounting."""

from __future__ import annotations

import io
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, TopicPartition

from artimon.servers import HdfsServer
from artimon.site import HISTORY_ROOT
from artimon.stack import KAFKA_TOPIC

__all__ = ["caught_up", "read_history", "topic_ends"]

MAX_FILE = 64 << 20  # a micro-batch's Parquet file or a checkpoint file of a test site: KBs
PARQUET = f"{HISTORY_ROOT}/parquet"
CHECKPOINT = f"{HISTORY_ROOT}/checkpoint"


def _get(url: str) -> bytes:
    with httpx.stream("GET", url, timeout=30, follow_redirects=True) as answer:
        body = b""
        for chunk in answer.iter_bytes():
            body += chunk
            assert len(body) <= MAX_FILE, f"{url} passes {MAX_FILE} bytes"
    assert answer.status_code == 200, (url, answer.status_code, body[:200])
    return body


def _url(hdfs: HdfsServer, path: str, op: str) -> str:
    return f"{hdfs.webhdfs}/webhdfs/v1{path}?op={op}&user.name=root"


def _names(hdfs: HdfsServer, path: str) -> list[str]:
    """The names in directory ``path`` (``[]`` while it does not exist)."""
    answer = httpx.get(_url(hdfs, path, "LISTSTATUS"), timeout=30)
    if answer.status_code == 404:
        return []
    assert answer.status_code == 200, answer.text
    return [status["pathSuffix"] for status in answer.json()["FileStatuses"]["FileStatus"]]


def _log_lines(hdfs: HdfsServer, path: str) -> list[Any]:
    """A ``v1`` log file of Spark's: its JSON lines after the version line."""
    version, *lines = _get(_url(hdfs, path, "OPEN")).decode().splitlines()
    assert version == "v1", f"{path} is a {version!r} log"
    return [json.loads(line) for line in lines if line.strip() not in ("", "-")]


def topic_ends(bootstrap: str) -> dict[int, int]:
    """The topic's end offset of each partition, now."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "site-test-ends"})
    try:
        partitions = consumer.list_topics(KAFKA_TOPIC, timeout=30).topics[KAFKA_TOPIC].partitions
        return {
            p: consumer.get_watermark_offsets(TopicPartition(KAFKA_TOPIC, p), timeout=30)[1]
            for p in partitions
        }
    finally:
        consumer.close()


def caught_up(hdfs: HdfsServer, ends: dict[int, int]) -> bool:
    """Whether the last committed micro-batch read every partition up to ``ends``."""
    committed = [int(name) for name in _names(hdfs, f"{CHECKPOINT}/commits") if name.isdigit()]
    if not committed:
        return False
    offsets = _log_lines(hdfs, f"{CHECKPOINT}/offsets/{max(committed)}")
    topic = next((line[KAFKA_TOPIC] for line in offsets if KAFKA_TOPIC in line), {})
    return all(int(topic.get(str(p), 0)) >= end for p, end in ends.items())


def read_history(hdfs: HdfsServer) -> pa.Table:
    """Every committed row of the history (its ``series``, ``ts`` and ``value``)."""
    log = f"{PARQUET}/_spark_metadata"
    entries = [
        entry
        for name in _names(hdfs, log)
        if name.removesuffix(".compact").isdigit()
        for entry in _log_lines(hdfs, f"{log}/{name}")
    ]
    paths = sorted({entry["path"] for entry in entries if entry["action"] == "add"})
    assert not {entry["path"] for entry in entries if entry["action"] != "add"}, "the sink deleted files"

    def read(uri: str) -> pa.Table:
        path = "/" + uri.split("://", 1)[1].split("/", 1)[1]
        body = _get(_url(hdfs, path, "OPEN"))
        return pq.read_table(io.BytesIO(body), columns=["series", "ts", "value"])

    with ThreadPoolExecutor(max_workers=8) as pool:
        tables = list(pool.map(read, paths))
    return pa.concat_tables(tables) if tables else pa.table({"series": [], "ts": [], "value": []})
