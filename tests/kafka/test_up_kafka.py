"""``artimon up --kafka``: the polling agent publishes onto the topic, the store agent reads
it as two consumer groups, into VHMS and into the landing files."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import fastavro
import pytest


@pytest.mark.slow
def test_up_with_kafka_stores_and_lands_every_round(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "artimon", "up", "--kafka", "--demo", "--no-spark"]
    command += ["--interval", "1", "--rounds", "3", "--data-dir", str(tmp_path)]
    command += ["--zk-port", "0", "--api-port", "0", "--thrift-port", "0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"\[ready\] kafka      127\.0\.0\.1:\d+ \(pid \d+, KRaft", out), out
    stored = [int(n) for n in re.findall(r"(\d+) samples stored", out)]
    assert len(stored) == 3 and sum(stored) > 0, out
    assert "stopped." in out
    # the stop waits for the store agent to take what was published: nothing left in Kafka
    (published,) = re.findall(r"kafka: the store agent took all (\d+) published events", out)
    config = (tmp_path / "agents-kafka.properties").read_text()
    assert "up.sinks.publish.type = kafka" in config and "store.sources.landing.type = kafka" in config
    landed = 0
    for path in (tmp_path / "landing").glob("land-*.avro"):  # the second consumer group's files
        with open(path, "rb") as data:
            landed += sum(1 for _ in fastavro.reader(data))
    assert landed == int(published) > 0  # every published event landed
    assert not (tmp_path / "kafka" / "node-1" / "kafka.pid").exists()  # removed once the broker exited
