"""One Spark standalone master and worker per test session, shared by the cluster tests
(about 6 s to start): jobs run on it from their own processes (``artimon spark --master``),
since this process's SparkSession is the local one of the ``spark`` fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bookkeeper.testing import SparkCluster


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster"), worker_cores=2, worker_memory="2g")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
