"""The standalone cluster harness: a master and a worker on loopback, the worker killed and
replaced, the directory held while they run."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import pytest

from artimon.servers import SparkCluster
from bookkeeper import DirectoryInUseError
from bookkeeper.testing import listening, running

pytestmark = pytest.mark.slow


def test_the_cluster_listens_on_loopback_and_replaces_a_killed_worker(
    spark_cluster: SparkCluster, wait: Callable[..., None]
) -> None:
    status = spark_cluster.status()
    assert status["status"] == "ALIVE" and status["url"] == spark_cluster.master_url
    assert spark_cluster.worker_alive() and status["cores"] == 2
    for pid in (spark_cluster.master_pid, spark_cluster.worker_pid):
        assert pid is not None
        listeners = listening(pid)
        assert listeners and all(ipaddress.ip_address(x.host).is_loopback for x in listeners), listeners
    with pytest.raises(DirectoryInUseError, match="in use by pid"):
        SparkCluster(spark_cluster.work_dir).start()
    killed = spark_cluster.worker_pid
    assert killed is not None
    spark_cluster.kill_worker()
    assert not running(killed)
    wait(lambda: not spark_cluster.worker_alive(), 30, "the master to see the worker gone")
    spark_cluster.start_worker()
    assert spark_cluster.worker_alive() and spark_cluster.worker_pid != killed
    assert spark_cluster.status()["aliveworkers"] == 1
