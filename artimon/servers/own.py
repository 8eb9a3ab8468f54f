"""Artimon's own processes as launchers, so that a site puts them on its hosts as it puts the
Java servers: a VHMS shard member (:class:`VhmsShard`, ``artimon vhms``), the HTTP query API
(:class:`QueryApiServer`, ``artimon api``), a collector agent (:class:`AgentServer`,
``artimon agent``), a Spark job's driver (:class:`SparkJobServer`, ``artimon spark``) and any
command that prints a line once it serves (:class:`CommandServer`: applications).

Each is a :class:`~artimon.servers.ServerProcess` running ``python -m artimon <command>``
on its placement (``host``), binding the placement's address, on the placement's ports
(:meth:`~artimon.servers.Placement.port_for` of the command's usual ones: a site's host has
them to itself, this machine gives free ones), holding its directory, ready when its HTTP
``/health`` answers 200 (or its line is printed), stopped by SIGTERM (each writes what it
must: VHMS its last snapshot, the agent its channels) and killed by SIGKILL.

Lifecycle: NEW --start()--> RUNNING --stop()/kill()--> STOPPED --start()--> RUNNING.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from artimon.servers.base import LOCAL, ServerProcess, Where, answers_ok, placed

__all__ = ["AgentServer", "CommandServer", "QueryApiServer", "SparkJobServer", "VhmsShard"]

_ARTIMON = (sys.executable, "-m", "artimon")


class _ArtimonProcess(ServerProcess):
    """``python -m artimon <arguments>`` on its placement, ready once ``health`` answers 200."""

    start_timeout = 90.0  # a Python process importing the platform on a loaded machine

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        name: str,
        host: Where,
        arguments: Sequence[str],
        health: str,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(data_dir, name, "process.log", pid_file="process.pid", host=host)
        self.arguments = list(arguments)
        self.health = health
        self.env = dict(env or {})

    def _start(self, timeout: float) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env}
        self._launch([*_ARTIMON, *self.arguments], lambda: answers_ok(self.health), timeout, env=env)


class VhmsShard(_ArtimonProcess):
    """One member (a replica) of VHMS shard ``shard``, registered in ZooKeeper ``zk``, its
    snapshots and write-ahead log in ``data_dir/<shard>``; Thrift on ``port``, HTTP on
    ``http_port`` (the placement's 7001 and 7002 by default). It catches up from the shard's
    other members at start (``--catch-up``): ready once it has."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        shard: str,
        zk: str,
        *,
        host: Where = LOCAL,
        resolutions: str | None = None,
        port: int = 0,
        http_port: int = 0,
    ) -> None:
        placement = placed(host)
        self.address = placement.address
        self.port = port or placement.port_for(7001)
        self.http_port = http_port or placement.port_for(7002)
        self.shard = shard
        arguments = ["vhms", "--shard", shard, "--zk", zk, "--data-dir", str(Path(data_dir).resolve())]
        arguments += ["--host", self.address, "--port", str(self.port), "--http-port", str(self.http_port)]
        arguments += ["--resolutions", resolutions] if resolutions else []
        arguments += ["--catch-up"]  # a member restarted empty pulls its peer's store; ready once whole
        name = f"VHMS shard {shard} on {self.address}:{self.port}"
        super().__init__(data_dir, name, placement, arguments, f"{self.http_url}/health")

    @property
    def http_url(self) -> str:
        return f"http://{self.address}:{self.http_port}"


class QueryApiServer(_ArtimonProcess):
    """The HTTP query API over every shard registered in ZooKeeper ``zk``, on ``port`` (the
    placement's 8080 by default)."""

    def __init__(
        self, data_dir: str | os.PathLike[str], zk: str, *, host: Where = LOCAL, port: int = 0
    ) -> None:
        placement = placed(host)
        self.address = placement.address
        self.port = port or placement.port_for(8080)
        arguments = ["api", "--zk", zk, "--host", self.address, "--port", str(self.port)]
        super().__init__(data_dir, f"query API on {self.url}", placement, arguments, f"{self.url}/health")

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"


class AgentServer(_ArtimonProcess):
    """Agent ``agent`` of the properties file ``properties``, its ``${...}`` taken from
    ``env`` (and this process's environment), its monitoring on ``monitor_port`` (the
    placement's 41414 by default) and, with ``zk``, its self-report registered there."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        properties: Path,
        agent: str,
        *,
        host: Where = LOCAL,
        zk: str | None = None,
        env: Mapping[str, str] | None = None,
        monitor_port: int = 0,
    ) -> None:
        placement = placed(host)
        self.address = placement.address
        self.agent = agent
        self.monitor_port = monitor_port or placement.port_for(41414)
        arguments = ["agent", "-f", str(properties.resolve()), "-n", agent]
        arguments += ["--monitor-host", self.address, "--monitor-port", str(self.monitor_port)]
        arguments += ["--zk", zk, "--report-host", self.address] if zk else []
        name = f"agent {agent} on {self.address}"
        super().__init__(data_dir, name, placement, arguments, f"{self.monitor_url}/health", env)

    @property
    def monitor_url(self) -> str:
        return f"http://{self.address}:{self.monitor_port}"


class SparkJobServer(_ArtimonProcess):
    """Spark job ``job`` (``artimon spark --master <master> <job> <arguments>``, a module of
    ``spark_jobs``) with the Spark settings ``conf``, its driver in this process on its
    placement: the driver binds the placement's address and names it to the executors
    (``spark.driver.bindAddress``, ``spark.driver.host``: they connect back to it from the
    master's workers, wherever those run). Its ``/metrics`` and ``/health`` on
    ``metrics_port`` (the placement's 9108 by default); ready once ``/health`` answers, that
    is once its SparkSession is up. Its driver's JVM ends with it (pyspark's gateway exits
    when its Python process is gone), its executors with the application."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        master: str,
        job: str,
        arguments: Sequence[str],
        *,
        conf: Mapping[str, str] | None = None,
        host: Where = LOCAL,
        metrics_port: int = 0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        placement = placed(host)
        self.address = placement.address
        self.metrics_port = metrics_port or placement.port_for(9108)
        self.job = job
        driver = {"spark.driver.bindAddress": self.address, "spark.driver.host": self.address}
        settings = {**driver, **(conf or {})}
        command = ["spark", "--master", master, *(f"--conf={key}={value}" for key, value in settings.items())]
        command += ["--metrics-host", self.address, "--metrics-port", str(self.metrics_port), job, *arguments]
        health = f"http://{self.address}:{self.metrics_port}/health"
        env = {"SPARK_LOCAL_IP": self.address, **(env or {})}
        super().__init__(data_dir, f"spark {job} on {self.address}", placement, command, health, env)


class CommandServer(ServerProcess):
    """Any ``command`` on its placement, ready once it printed ``ready_lines`` lines to its
    standard output (which goes to ``data_dir/process.log`` with its standard error), such as
    applications printing a ``READY`` line per context served."""

    start_timeout = 90.0

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        name: str,
        command: Sequence[str],
        *,
        host: Where = LOCAL,
        ready: str = "READY",
        ready_lines: int = 1,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(data_dir, name, "process.log", pid_file="process.pid", host=host)
        self.command = list(command)
        self.ready = ready
        self.ready_lines = ready_lines
        self.env = dict(env or {})
        self._log_start = 0

    def lines(self) -> list[str]:
        """The lines it printed that start with ``ready``, since its last start."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_start)
                text = log.read(1 << 20).decode(errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if line.startswith(self.ready)]

    def _start(self, timeout: float) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._launch(self.command, self._printed, timeout, env={**os.environ, **self.env})

    def _printed(self) -> bool:
        return len(self.lines()) >= self.ready_lines
