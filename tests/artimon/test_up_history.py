"""``artimon up`` stopped with SIGTERM brings its Parquet history up to date and exits at
once, not at the streaming query's next trigger (five minutes away). It runs with ``--hdfs``:
the history on the embedded HDFS, read back from ``hdfs://`` afterwards (the other tests of
``up`` keep the ``file://`` default)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from artimon.servers import HdfsServer

ARTIMON = [sys.executable, "-m", "artimon"]
STOP_BOUND = 90.0  # seconds from SIGTERM to exit; the trigger is 300 s away


def _lines_until(process: subprocess.Popen[str], prefix: str, count: int, timeout: float) -> list[str]:
    """Lines printed until ``count`` of them have started with ``prefix``."""
    lines: list[str] = []
    done = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if sum(seen.startswith(prefix) for seen in lines) >= count:
                done.set()
                return

    threading.Thread(target=read, daemon=True).start()
    if not done.wait(timeout):
        raise AssertionError(f"not {count} {prefix!r} lines within {timeout} s: {lines}")
    return lines


@pytest.mark.slow
def test_up_stopped_brings_the_history_up_to_date_without_waiting_for_the_trigger(
    tmp_path: Path, spark: Any
) -> None:
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k != "ARTIMON_ZK"}  # its own ZooKeeper
    env["ARTIMON_SPARK_DRIVER_MEMORY"] = "1g"
    command = [*ARTIMON, "up", "--data-dir", str(data), "--interval", "1"]
    command += ["--zk-port", "0", "--api-port", "0", "--thrift-port", "0", "--hdfs"]
    with open(tmp_path / "up.log", "w") as log:
        up = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    try:
        ready = _lines_until(up, "[ready] spark", 1, timeout=240)
        query_started_ms = int(time.time() * 1000)  # its first micro-batch is under way
        _lines_until(up, "round ", 3, timeout=60)  # rounds the running query has not processed
        up.send_signal(signal.SIGTERM)
        started = time.monotonic()
        rest, _ = up.communicate(timeout=STOP_BOUND)
        took = time.monotonic() - started
    finally:
        if up.poll() is None:
            up.kill()
            up.communicate()
    assert up.returncode == 0, rest
    assert "spark raw_ingest: history up to date" in rest, rest
    assert took < STOP_BOUND, took
    (uri,) = [line.split()[2] for line in ready if line.startswith("[ready] hdfs")]
    assert uri.startswith("hdfs://127.0.0.1:") and not (data / "history").exists()
    with HdfsServer(data / "hdfs", int(uri.rpartition(":")[2])) as hdfs:  # the same files, started again
        newest = spark.read.parquet(f"{hdfs.uri}/artimon/history/parquet").agg({"ts": "max"}).collect()[0][0]
    newest_ms = int(newest.timestamp() * 1000)
    assert newest_ms >= query_started_ms, "rounds landed after the query started are not in the history"
    assert not list((data / "landing").glob("*.avro")), "landing files left unprocessed"
