"""The Spark jobs' tests write their history where production does: on a real HDFS (one
NameNode and one DataNode per test session, from Hadoop's own jars), each test under a root
of its own (``hdfs_history.py``). ``ARTIMON_TEST_HISTORY=file`` puts it under the test's
``tmp_path`` instead. One Spark standalone master and worker per test session (about 6 s to
start) is shared by the cluster tests: jobs run on it from their own processes (``artimon
spark --master``), since this process's SparkSession is the local one of the ``spark``
fixture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hdfs_history import History, new_history, use_client_conf

from artimon.servers import HdfsServer, SparkCluster


@pytest.fixture(scope="session")
def hdfs(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[HdfsServer]:
    """One HDFS for the session (about 3 s to start once the jars are cached), the shared
    Spark session configured as its client."""
    server = HdfsServer(tmp_path_factory.mktemp("hdfs")).start()
    use_client_conf(spark, server)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def history_root(request: pytest.FixtureRequest, tmp_path: Path) -> History:
    return new_history(request, tmp_path)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster"), worker_cores=2, worker_memory="2g")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
