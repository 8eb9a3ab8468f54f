"""A real Spark standalone cluster, one master and one worker, started from the pyspark wheel
itself, for ``artimon up --cluster``, tests and benchmarks.

``SparkCluster(work_dir).start()`` runs ``<pyspark>/bin/spark-class
org.apache.spark.deploy.master.Master`` and then ``...deploy.worker.Worker spark://...``,
both bound to ``host`` (127.0.0.1 unless told otherwise) on free ports, with small daemon
heaps, and waits until the master's JSON status (``<web_url>/json/``) shows the worker
ALIVE. The master's REST submission server (port 6066 on every start otherwise) is off.
The worker offers ``worker_cores`` cores and ``worker_memory`` to executors; executors'
shuffle and scratch files and the applications' logs stay under ``work_dir``.

``stop()`` ends the worker, then the master, by their PIDs (SIGTERM, then SIGKILL after a
grace period). ``kill_worker()`` SIGKILLs the worker (its executors exit when they lose it)
and ``start_worker()`` starts a new one, on a new port, and waits until the master counts
it; a stopped cluster starts again. The master and the worker are each a
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from artimon.servers.base import ServerGroup, ServerProcess, free_port, wait_ready
from artimon.servers.zookeeper import pyspark_jars
from bookkeeper.ground import DirectoryLock

__all__ = ["SparkCluster"]

_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"
_STATUS_MAX_BYTES = 1 << 20  # the master's JSON for one worker and a few applications: a few KB


class _Daemon(ServerProcess):
    """The master or the worker of a :class:`SparkCluster`: one JVM, holding its lock."""

    def __init__(
        self, cluster: SparkCluster, role: str, arguments: Callable[[], list[str]], lock: DirectoryLock
    ) -> None:
        super().__init__(
            cluster.work_dir, f"the Spark {role} of {cluster.master_url}", f"{role}.log", lock=lock
        )
        self._cluster = cluster
        self._arguments = arguments

    def _start(self, timeout: float) -> None:
        spark_class = pyspark_jars().parent / "bin" / "spark-class"
        command = [str(spark_class), *self._arguments()]
        self._launch(command, self._cluster.worker_alive, timeout, env=self._cluster._environment())


class SparkCluster(ServerGroup):
    """One standalone master and one worker (see the module doc)."""

    start_timeout = 90.0
    stop_grace = 15.0

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        web_port: int = 0,
        worker_cores: int = 2,
        worker_memory: str = "2g",
        daemon_heap: str = "256m",
    ) -> None:
        self.work_dir = Path(work_dir)
        self.host = host
        self.port = port or free_port(host)
        self.web_port = web_port or free_port(host)
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.daemon_heap = daemon_heap
        self.worker_port = 0
        self._lock = DirectoryLock(self.work_dir, f"spark cluster launcher for {self.master_url}")
        master = [_MASTER, "--host", host, "--port", str(self.port), "--webui-port", str(self.web_port)]
        self._master = _Daemon(self, "master", lambda: master, self._lock)
        self._worker = _Daemon(self, "worker", self._worker_arguments, self._lock)
        self._processes = [self._worker, self._master]  # the worker (and its executors) first
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

    def worker_alive(self) -> bool:
        """Whether the master counts the current worker as ALIVE."""
        return any(
            w.get("host") == self.host and w.get("port") == self.worker_port and w.get("state") == "ALIVE"
            for w in self.status().get("workers", [])
        )

    def _environment(self) -> dict[str, str]:
        spark_home = pyspark_jars().parent
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home),
            "SPARK_LOCAL_IP": self.host,
            "SPARK_DAEMON_MEMORY": self.daemon_heap,
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_WORKER_DIR": str(self.work_dir.resolve() / "worker"),
            "SPARK_LOCAL_DIRS": str(self.work_dir.resolve() / "local"),
            "SPARK_LOG_DIR": str(self.work_dir.resolve() / "logs"),
        }

    def _worker_arguments(self) -> list[str]:
        """A new worker's: on a new port (the master may still count the last one)."""
        self.worker_port = free_port(self.host)
        return [
            _WORKER,
            *("--host", self.host, "--port", str(self.worker_port)),
            *("--webui-port", str(free_port(self.host))),
            *("--cores", str(self.worker_cores), "--memory", self.worker_memory),
            self.master_url,
        ]

    def _start(self, timeout: float) -> None:
        """Start the master and the worker and wait until the worker is ALIVE."""
        for directory in ("worker", "local", "logs"):
            (self.work_dir / directory).mkdir(parents=True, exist_ok=True)
        self._master.start(timeout=0)
        self.start_worker(timeout)

    def start_worker(self, timeout: float = 90.0) -> None:
        """Start a worker (a new one on a new port) and wait until the master counts it ALIVE."""
        self._worker.start(timeout=0)
        daemons = [self._master, self._worker]
        wait_ready(daemons, self.worker_alive, timeout, f"a worker of {self.master_url}", poll=0.2)

    @property
    def master_pid(self) -> int | None:
        return self._master.pid

    @property
    def worker_pid(self) -> int | None:
        return self._worker.pid

    def kill_worker(self) -> None:
        """SIGKILL the worker, as a machine lost would; its executors exit when they lose it."""
        if self._worker.running:
            self._worker.kill()
