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
it; a stopped cluster starts again. The JVMs die with the process that launched them
(:func:`bookkeeper.process.spawn`, ``spark-class`` ``exec``\\ s the JVM so the PID is its
own), and ``work_dir`` is held (``in_use.lock``) from ``start()`` until both have exited.

Lifecycle: NEW --start()--> RUNNING --stop()--> STOPPED --start()--> RUNNING; while
RUNNING: kill_worker() --> WORKERLESS --start_worker()--> RUNNING.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from bookkeeper.ground import DirectoryLock, spawn, terminate
from bookkeeper.testing.zkserver import free_port, pyspark_jars

__all__ = ["SparkCluster"]

log = logging.getLogger(__name__)

_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"
_STATUS_MAX_BYTES = 1 << 20  # the master's JSON for one worker and a few applications: a few KB


class SparkCluster:
    """One standalone master and one worker (see the module doc)."""

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
        self.master: subprocess.Popen[bytes] | None = None
        self.worker: subprocess.Popen[bytes] | None = None
        self._lock = DirectoryLock(self.work_dir, f"spark cluster launcher for {self.master_url}")

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
        status: dict[str, Any] = json.loads(body)
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

    def _spawn(self, role: str, arguments: list[str]) -> subprocess.Popen[bytes]:
        spark_class = pyspark_jars().parent / "bin" / "spark-class"
        with open(self.work_dir / f"{role}.log", "ab") as output:
            process = spawn(
                [str(spark_class), *arguments],
                env=self._environment(),
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=[self._lock.fd],  # the JVMs hold the directory too
            )
        self._lock.share_with(process.pid, f"spark {role} of {self.master_url}")
        return process

    def start(self, timeout: float = 90.0) -> SparkCluster:
        """Start the master and the worker and wait until the worker is ALIVE; ``RuntimeError``
        with the logs' last lines if not, :class:`~bookkeeper.DirectoryInUseError` if another
        process holds ``work_dir``."""
        if self.master is not None and self.master.poll() is None:
            return self
        self._lock.acquire()
        try:
            for directory in ("worker", "local", "logs"):
                (self.work_dir / directory).mkdir(parents=True, exist_ok=True)
            self.master = self._spawn(
                "master",
                [_MASTER, "--host", self.host, "--port", str(self.port), "--webui-port", str(self.web_port)],
            )
            self.start_worker(timeout)
        except BaseException:
            self.stop()
            raise
        log.info("Spark master %s (pid %s), worker pid %s", self.master_url, self.master.pid, self.worker_pid)
        return self

    def start_worker(self, timeout: float = 90.0) -> None:
        """Start a worker (a new one on a new port) and wait until the master counts it ALIVE."""
        if self.worker is not None and self.worker.poll() is None:
            return
        self.worker_port = free_port(self.host)
        self.worker = self._spawn(
            "worker",
            [
                _WORKER,
                *("--host", self.host, "--port", str(self.worker_port)),
                *("--webui-port", str(free_port(self.host))),
                *("--cores", str(self.worker_cores), "--memory", self.worker_memory),
                self.master_url,
            ],
        )
        deadline = time.monotonic() + timeout
        while not self.worker_alive():
            for role, process in (("master", self.master), ("worker", self.worker)):
                if process is None or process.poll() is not None:
                    raise RuntimeError(f"the Spark {role} exited; last lines of its log:\n{self._tail(role)}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"no ALIVE worker at {self.master_url} within {timeout} s; last lines of the logs:\n"
                    f"{self._tail('master')}\n{self._tail('worker')}"
                )
            time.sleep(0.2)  # polling starting JVMs: no event to wait on

    @property
    def master_pid(self) -> int | None:
        return self.master.pid if self.master else None

    @property
    def worker_pid(self) -> int | None:
        return self.worker.pid if self.worker else None

    def kill_worker(self) -> None:
        """SIGKILL the worker, as a machine lost would; its executors exit when they lose it."""
        process, self.worker = self.worker, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            process.wait()

    def _tail(self, role: str, lines: int = 15) -> str:
        try:
            return "\n".join(
                (self.work_dir / f"{role}.log").read_text(errors="replace").splitlines()[-lines:]
            )
        except OSError:
            return "(no log)"

    def stop(self, grace: float = 15.0) -> None:
        """The worker (and its executors), then the master: SIGTERM, SIGKILL after ``grace``
        seconds; then let ``work_dir`` go."""
        try:
            for attribute in ("worker", "master"):
                process = getattr(self, attribute)
                setattr(self, attribute, None)
                if process is not None and process.poll() is None:
                    terminate(process, grace)
        finally:
            self._lock.release()

    def restart(self, timeout: float = 90.0) -> SparkCluster:
        """Stop, then start again on the same ports and directory."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
