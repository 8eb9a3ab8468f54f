"""raw_ingest on a real HDFS that fails under it: the DataNode killed mid-stream and the
NameNode between batches (every sample exactly once in the Parquet read back), safe mode
(a clear line, retries, no crash), a quota and a permission refused (an error naming the
path, the landing files kept). The HDFS here is this module's own: its daemons get killed."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hdfs_history import use_client_conf
from test_raw_ingest import land, observed

from artimon.servers import HdfsServer
from spark_jobs import HistoryPathError, raw_ingest

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def faulty_hdfs(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[HdfsServer]:
    server = HdfsServer(tmp_path_factory.mktemp("faulty-hdfs"), superuser="hdfs").start()
    use_client_conf(spark, server)
    try:
        yield server
    finally:
        server.stop()


def _landing(directory: Path, files: int) -> list[tuple[str, int, object]]:
    directory.mkdir()
    expected = []
    for n in range(files):
        expected += land(directory / f"f{n}.avro", range(n * 2, n * 2 + 2))
    return expected


def _ingest_job(landing: Path, server: HdfsServer, root: str, log: Path) -> subprocess.Popen[bytes]:
    """``artimon spark raw_ingest`` streaming a landing file per second, configured the
    Hadoop way (``HADOOP_CONF_DIR``), its log in ``log``."""
    command = [sys.executable, "-m", "artimon", "spark", "--master", "local[2]", "raw_ingest"]
    command += ["--landing", str(landing), "--output", f"{server.uri}{root}/parquet"]
    command += [
        "--checkpoint",
        f"{server.uri}{root}/checkpoint",
        "--max-files",
        "1",
        "--interval",
        "1 second",
    ]
    env = {**os.environ, "HADOOP_CONF_DIR": str(server.conf_dir)}
    with open(log, "wb") as output:
        return subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def test_datanode_killed_mid_stream_and_namenode_between_batches_lose_and_double_nothing(
    spark: Any, faulty_hdfs: HdfsServer, tmp_path: Path, wait: Callable[..., None]
) -> None:
    server = faulty_hdfs
    expected = _landing(tmp_path / "landing", 4)
    log = tmp_path / "job.log"
    job = _ingest_job(tmp_path / "landing", server, "/faults", log)

    def commits() -> int:
        assert job.poll() is None, f"the job ended by itself:\n{log.read_text()[-3000:]}"
        return len([name for name in server.ls("/faults/checkpoint/commits") if name.isdigit()])

    def retries() -> int:
        return log.read_text(errors="replace").count("HDFS unavailable at hdfs://")

    try:
        wait(lambda: commits() >= 1, 180, "a first micro-batch committed")
        server.kill_datanode()  # the next batch is on its way: its files lose their only DataNode
        wait(lambda: retries() >= 1, 120, "raw_ingest retrying while the DataNode is down")
        server.start_datanode()
        wait(lambda: commits() >= 2, 180, "a batch committed again with the DataNode back")
        server.kill_namenode()  # between two batches (one a second)
        wait(lambda: retries() >= 2, 120, "raw_ingest retrying while the NameNode is down")
        server.start_namenode()
        wait(lambda: commits() >= 4, 180, "every landing file committed")
        assert job.poll() is None, "the job crashed instead of retrying"
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        server.start_namenode()  # whatever failed: the module's next tests need both daemons
        server.start_datanode()
    frame = spark.read.parquet(f"{server.uri}/faults/parquet").toPandas()
    assert len(frame) == len(expected)
    assert sorted(observed(frame), key=repr) == sorted(expected, key=repr)


def test_safe_mode_is_waited_out_with_a_clear_line_and_no_crash(
    spark: Any,
    faulty_hdfs: HdfsServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    wait: Callable[..., None],
) -> None:
    expected = _landing(tmp_path / "landing", 1)
    faulty_hdfs.admin("-safemode", "enter")
    errors: list[BaseException] = []

    def ingest() -> None:
        try:
            raw_ingest.ingest_once(
                spark,
                str(tmp_path / "landing"),
                f"{faulty_hdfs.uri}/safe/parquet",
                f"{faulty_hdfs.uri}/safe/cp",
            )
        except BaseException as exc:  # handed to the test
            errors.append(exc)

    caplog.set_level(logging.WARNING, logger="spark_jobs.history_fs")
    worker = threading.Thread(target=ingest)
    worker.start()
    try:
        wait(lambda: "the NameNode is in safe mode at hdfs://" in caplog.text, 60, "the safe mode line")
        assert worker.is_alive() and not errors
    finally:
        faulty_hdfs.admin("-safemode", "leave")
        worker.join(120)
    assert not errors and not worker.is_alive()
    frame = spark.read.parquet(f"{faulty_hdfs.uri}/safe/parquet").toPandas()
    assert sorted(observed(frame), key=repr) == sorted(expected, key=repr)


def test_a_quota_exceeded_names_the_path_and_keeps_the_landing_files(
    spark: Any, faulty_hdfs: HdfsServer, tmp_path: Path
) -> None:
    _landing(tmp_path / "landing", 1)
    jvm, conf = spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()
    mine = jvm.org.apache.hadoop.fs.Path(f"{faulty_hdfs.uri}/quota")
    mine.getFileSystem(conf).mkdirs(mine)  # this process's user owns it
    faulty_hdfs.admin("-setSpaceQuota", "1", "/quota")
    output = f"{faulty_hdfs.uri}/quota/parquet"
    with pytest.raises(HistoryPathError, match=r"space quota exceeded on the history path .*/quota/parquet"):
        raw_ingest.ingest_once(
            spark, str(tmp_path / "landing"), output, f"{faulty_hdfs.uri}/quota/cp", processed="delete"
        )
    assert (tmp_path / "landing" / "f0.avro").exists()


def test_a_permission_denied_names_the_path_and_keeps_the_landing_files(
    spark: Any, faulty_hdfs: HdfsServer, tmp_path: Path
) -> None:
    _landing(tmp_path / "landing", 1)
    faulty_hdfs.dfs("-mkdir", "-p", "/owned-by-hdfs")  # drwxr-xr-x hdfs: not this process's user
    root = f"{faulty_hdfs.uri}/owned-by-hdfs"
    started = time.monotonic()
    with pytest.raises(HistoryPathError) as refused:
        raw_ingest.ingest_once(
            spark, str(tmp_path / "landing"), f"{root}/parquet", f"{root}/cp", processed="delete"
        )
    assert f"permission denied on the history path {root}/parquet or {root}/cp" in str(refused.value)
    assert 'inode="/owned-by-hdfs' in str(refused.value)
    assert time.monotonic() - started < 60  # refused at once, not retried
    assert (tmp_path / "landing" / "f0.avro").exists()
