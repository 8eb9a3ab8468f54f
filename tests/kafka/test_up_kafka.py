"""``artimon up --kafka``: the polling agent publishes onto the topic, the store agent reads
it into VHMS, and Spark's raw_ingest reads the same topic into the Parquet history (no
landing file)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest


@pytest.mark.slow
def test_up_with_kafka_stores_every_round_and_spark_reads_the_topic(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "artimon", "up", "--kafka", "--demo"]
    command += ["--interval", "1", "--rounds", "3", "--data-dir", str(tmp_path)]
    command += ["--zk-port", "0", "--api-port", "0", "--thrift-port", "0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"\[ready\] kafka      127\.0\.0\.1:\d+ \(pid \d+, KRaft", out), out
    assert re.search(
        r"\[ready\] spark      raw_ingest kafka topic artimon-samples of 127\.0\.0\.1:\d+", out
    ), out
    # a round's line is printed at 80 % of the round: under load the store agent's share of
    # it (through Kafka) may come after the three lines, so what was stored is checked at the stop
    assert len(re.findall(r"\d+ samples stored", out)) == 3, out
    assert "stopped." in out
    # the stop waits for the store agent to take what was published: nothing left in Kafka
    took = re.search(r"kafka: the store agent took all (\d+) published events", out)
    assert took and int(took[1]) > 0, out
    assert "spark raw_ingest: history up to date" in out, out
    config = (tmp_path / "agents-kafka.properties").read_text()
    assert "up.sinks.publish.type = kafka" in config and "store.sources.landing" not in config
    assert not list((tmp_path / "landing").glob("*.avro"))  # the history came from the topic
    history = ds.dataset(tmp_path / "history" / "parquet", format="parquet", partitioning="hive").to_table()
    pairs = {(s, t) for s, t in zip(history["series"].to_pylist(), history["ts"].to_pylist(), strict=True)}
    assert history.num_rows > 0 and len(pairs) == history.num_rows  # each sample once
    assert len({t for _, t in pairs}) >= 3  # every round published reached the history
    assert not (tmp_path / "kafka" / "node-1" / "kafka.pid").exists()  # removed once the broker exited
