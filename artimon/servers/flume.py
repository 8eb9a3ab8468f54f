"""A real Apache Flume 1.11.0 agent, for interop tests and side-by-side runs.

``FlumeAgent(data_dir, properties, ports=[4141]).start()`` writes ``flume.conf`` (the
properties text, agent ``a1`` unless told otherwise) and a ``log4j2.xml`` logging to
``flume.log``, runs ``java -cp <jars> org.apache.flume.node.Application -f flume.conf -n a1``
with Flume's HTTP monitoring on a free port, and waits until the monitoring answers and every
port in ``ports`` (its sources' ports) accepts a connection. ``metrics()`` is Flume's
``/metrics`` JSON (``{"SOURCE.r": {"EventAcceptedCount": "10", ...}, ...}``). ``stop()``
ends it by its PID. The jars (``flume-ng-node`` with core, channels, sinks and the SDK, and
a log4j binding) are resolved once with Maven (:func:`flume_jars`).

Lifecycle: NEW --start()--> RUNNING --stop()--> STOPPED --start()--> RUNNING
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from artimon.servers.base import ServerProcess, free_port
from artimon.servers.jars import resolve_jars

__all__ = ["FLUME_ARTIFACTS", "FLUME_JAR_SET", "FlumeAgent", "flume_jars"]

FLUME_VERSION = "1.11.0"
FLUME_JAR_SET = f"flume-{FLUME_VERSION}"
FLUME_ARTIFACTS = (
    f"org.apache.flume:flume-ng-node:{FLUME_VERSION}",
    "org.apache.logging.log4j:log4j-slf4j-impl:2.18.0",
    "org.apache.logging.log4j:log4j-core:2.18.0",
)
_LOG4J = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <File name="log" fileName="{log}">
      <PatternLayout pattern="%d{{ISO8601}} %-5p [%t] %c: %m%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="log"/></Root>
  </Loggers>
</Configuration>
"""


def flume_jars() -> list[Path]:
    """Flume's agent jars, resolved once into the jar cache."""
    return resolve_jars(FLUME_JAR_SET, FLUME_ARTIFACTS)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


class FlumeAgent(ServerProcess):
    """One Flume agent process (see the module doc)."""

    start_timeout = 90.0

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        properties: str,
        *,
        agent: str = "a1",
        ports: Sequence[int] = (),
        heap: str = "256m",
        java: str | None = None,
    ) -> None:
        self.properties = properties
        self.agent = agent
        self.ports = list(ports)
        self.heap = heap
        self.java = java or shutil.which("java") or "java"
        self.monitoring_port = free_port()
        super().__init__(
            data_dir,
            f"flume agent {agent} in {data_dir}",
            "flume.log",
            pid_file="flume.pid",
            holder=f"flume launcher of agent {agent}",
        )

    def _start(self, timeout: float) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "flume.conf"
        config.write_text(self.properties)
        log4j = self.data_dir / "log4j2.xml"
        log4j.write_text(_LOG4J.format(log=self.log_path.resolve()))
        command = [
            self.java,
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            f"-Dlog4j.configurationFile={log4j.resolve()}",
            "-Dflume.monitoring.type=http",
            f"-Dflume.monitoring.port={self.monitoring_port}",
            "-cp",
            os.pathsep.join(str(jar) for jar in flume_jars()),
            "org.apache.flume.node.Application",
            "-f",
            str(config.resolve()),
            "-n",
            self.agent,
        ]
        self._launch(command, self._ready, timeout)

    def _ready(self) -> bool:
        return self._metrics() is not None and all(_accepts(port) for port in self.ports)

    def _metrics(self) -> dict[str, dict[str, str]] | None:
        url = f"http://127.0.0.1:{self.monitoring_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=2.0) as answer:
                loaded = json.loads(answer.read(1 << 20))
        except (urllib.error.URLError, OSError, ValueError):
            return None
        return loaded if isinstance(loaded, dict) else None

    def metrics(self) -> dict[str, dict[str, str]]:
        """Flume's ``/metrics``: counters by component (values are strings, as Flume gives
        them); empty while it does not answer."""
        return self._metrics() or {}

    def counter(self, component: str, name: str) -> int:
        """One counter of ``metrics()`` as an integer (0 while absent)."""
        return int(self.metrics().get(component, {}).get(name, 0))
