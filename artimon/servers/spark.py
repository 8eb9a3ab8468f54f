"""A real Spark standalone cluster, one master and one worker (or several: ``workers=``),
started from the pyspark wheel itself, for ``artimon up --cluster``, a site's topology,
tests and benchmarks.

``SparkCluster(work_dir).start()`` runs ``<pyspark>/bin/spark-class
org.apache.spark.deploy.master.Master`` and then ``...deploy.worker.Worker spark://...``,
per worker, the master bound to ``host`` (127.0.0.1 unless told otherwise) and each worker
to its own placement (``host`` by default), on the placement's ports (free ones here), with
small daemon heaps, and waits until the master's JSON status (``<web_url>/json/``) shows
every worker ALIVE. The master's REST submission server (port 6066 on every start otherwise) is off.
The worker offers ``worker_cores`` cores and ``worker_memory`` to executors; executors'
shuffle and scratch files and the applications' logs stay under ``work_dir``.

``stop()`` ends the workers, then the master, by their PIDs (SIGTERM, then SIGKILL after a
grace period). ``kill_worker(i)`` SIGKILLs a worker (its executors exit when they lose it)
and ``start_worker(i)`` starts a new one, on a new port here, and waits until the master
counts it; a stopped cluster starts again. The master and the worker are each a
:class:`~artimon.servers.ServerProcess` sharing the lock of ``work_dir``: their JVMs die
with the process that launched them (:func:`bookkeeper.ground.spawn`, ``spark-class``
``exec``\\ s the JVM so the PID is its own), and ``work_dir`` is held (``in_use.lock``) from
``start()`` until both have exited.

Lifecycle: NEW --start()--> RUNNING --stop()--> STOPPED --start()--> RUNNING; while
RUNNING: kill_worker() --> WORKERLESS --start_worker()--> RUNNING.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from artimon.servers.base import Placement, ServerGroup, ServerProcess, Where, placed, wait_ready
from artimon.servers.zookeeper import pyspark_jars
from bookkeeper.ground import DirectoryLock

__all__ = ["SparkCluster"]

_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"
_STATUS_MAX_BYTES = 1 << 20  # the master's JSON for one worker and a few applications: a few KB


class _Daemon(ServerProcess):
    """The master or a worker of a :class:`SparkCluster`: one JVM on its placement, holding
    the cluster's lock; ``role`` names its log and its directories."""

    def __init__(
        self, cluster: SparkCluster, role: str, arguments: Callable[[], list[str]], host: Placement
    ) -> None:
        super().__init__(
            cluster.work_dir,
            f"the Spark {role} of {cluster.master_url}",
            f"{role}.log",
            lock=cluster._lock,
            host=host,
        )
        self.role = role
        self.port = 0  # a worker's, chosen at each start
        self._cluster = cluster
        self._arguments = arguments

    def _start(self, timeout: float) -> None:
        spark_class = pyspark_jars().parent / "bin" / "spark-class"
        command = [str(spark_class), *self._arguments()]
        self._launch(command, self._cluster.worker_alive, timeout, env=self._cluster._environment(self))


class SparkCluster(ServerGroup):
    """One standalone master on ``host`` and a worker on each of ``workers`` (default: one,
    on ``host``), each an address here or a placement (see the module doc)."""

    start_timeout = 90.0
    stop_grace = 15.0

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        *,
        host: Where = "127.0.0.1",
        workers: Sequence[Where] = (),
        port: int = 0,
        web_port: int = 0,
        worker_cores: int = 2,
        worker_memory: str = "2g",
        daemon_heap: str = "256m",
    ) -> None:
        self.work_dir = Path(work_dir)
        placement = placed(host)
        self.host = placement.address
        self.port = port or placement.port_for(7077)
        self.web_port = web_port or placement.port_for(8080)
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.daemon_heap = daemon_heap
        self._lock = DirectoryLock(self.work_dir, f"spark cluster launcher for {self.master_url}")
        master = [_MASTER, "--host", self.host, "--port", str(self.port), "--webui-port", str(self.web_port)]
        self._master = _Daemon(self, "master", lambda: master, placement)
        self._workers = [
            self._worker_daemon(index, placed(where)) for index, where in enumerate(workers or [placement])
        ]
        self._processes = [*self._workers, self._master]  # the workers (and their executors) first
        self.name = f"the Spark cluster of {self.master_url}"

    @property
    def master_url(self) -> str:
        """What ``--master`` takes: ``spark://host:port``."""
        return f"spark://{self.host}:{self.port}"

    @property
    def web_url(self) -> str:
        return f"http://{self.host}:{self.web_port}"

    def status(self, timeout: float = 2.0) -> dict[str, Any]:
        """The master's JSON status (workers, applications); ``{}`` while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.web_url}/json/", timeout=timeout) as answer:
                body = answer.read(_STATUS_MAX_BYTES + 1)
        except (OSError, urllib.error.URLError):
            return {}
        if len(body) > _STATUS_MAX_BYTES:
            raise RuntimeError(
                f"the Spark master's status at {self.web_url} passes {_STATUS_MAX_BYTES} bytes"
            )
        try:
            status: dict[str, Any] = json.loads(body)
        except ValueError:  # a master still starting may answer an empty page: not yet
            return {}
        return status

    @property
    def worker_port(self) -> int:
        """The first worker's port."""
        return self._workers[0].port

    def worker_alive(self) -> bool:
        """Whether the master counts every worker (on the port of its last start) as ALIVE."""
        workers = self.status().get("workers", [])
        alive = {(w.get("host"), w.get("port")) for w in workers if w.get("state") == "ALIVE"}
        return all((w.placement.address, w.port) in alive for w in self._workers)

    def _environment(self, daemon: _Daemon) -> dict[str, str]:
        spark_home = pyspark_jars().parent
        work_dir = self.work_dir.resolve()
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home),
            "SPARK_LOCAL_IP": daemon.placement.address,
            "SPARK_DAEMON_MEMORY": self.daemon_heap,
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_WORKER_DIR": str(work_dir / daemon.role),
            "SPARK_LOCAL_DIRS": str(work_dir / "local"),
            "SPARK_LOG_DIR": str(work_dir / "logs"),
        }

    def _worker_daemon(self, index: int, placement: Placement) -> _Daemon:
        """Worker ``index``; the first keeps the names of a one-worker cluster (``worker``)."""
        role = f"worker-{index + 1}" if index else "worker"

        def arguments() -> list[str]:
            # a new worker here takes a new port (the master may still count the last one)
            daemon.port = placement.port_for(7078)
            return [
                _WORKER,
                *("--host", placement.address, "--port", str(daemon.port)),
                *("--webui-port", str(placement.port_for(8081))),
                *("--cores", str(self.worker_cores), "--memory", self.worker_memory),
                self.master_url,
            ]

        daemon = _Daemon(self, role, arguments, placement)
        return daemon

    def _start(self, timeout: float) -> None:
        """Start the master and the workers and wait until every worker is ALIVE."""
        for directory in ("local", "logs", *(daemon.role for daemon in self._workers)):
            (self.work_dir / directory).mkdir(parents=True, exist_ok=True)
        self._master.start(timeout=0)
        for index in range(len(self._workers)):
            self.start_worker(timeout=0, index=index)
        if timeout:
            wait_ready([self._master, *self._workers], self.worker_alive, timeout, self.name, poll=0.2)

    def start_worker(self, timeout: float = 90.0, index: int = 0) -> None:
        """Start worker ``index`` (a new one) and wait until the master counts it ALIVE."""
        worker = self._workers[index]
        worker.start(timeout=0)
        if timeout:
            what = f"{worker.role} of {self.master_url}"
            wait_ready([self._master, worker], self.worker_alive, timeout, what, poll=0.2)

    @property
    def master_pid(self) -> int | None:
        return self._master.pid

    @property
    def worker_pid(self) -> int | None:
        return self._workers[0].pid

    def kill_worker(self, index: int = 0) -> None:
        """SIGKILL worker ``index``, as a machine lost would; its executors exit when they lose it."""
        if self._workers[index].running:
            self._workers[index].kill()
