"""A real ZooKeeper server from the jars inside the pyspark wheel, for the embedded stack,
``artimon zk`` and tests.

``ZooKeeperServer(data_dir).start()`` writes a ``zoo.cfg`` (bound to ``host``, 127.0.0.1
unless told otherwise, its own data dir, admin server off, ``4lw.commands.whitelist=ruok,srvr,mntr``), runs
``java -cp <pyspark>/jars/* org.apache.zookeeper.server.ZooKeeperServerMain zoo.cfg`` and
waits until the server serves: ``srvr`` answers with its version (``ruok`` answers
``imok`` a moment before, while ``mntr`` still says "not currently serving requests").
``stop()`` ends it by its PID
(SIGTERM, then SIGKILL after a grace period). A stopped server can be started again on the
same port and data (to test a ZooKeeper restart).

The JVM dies with the process that launched it (:func:`bookkeeper.ground.spawn`), and
the data directory is held (``in_use.lock``, see :class:`bookkeeper.ground.DirectoryLock`)
by the launcher and the JVM from ``start()`` until the JVM has exited: a second server on
the same directory is refused with :class:`~bookkeeper.DirectoryInUseError` naming the
holder's PID instead of writing the same transaction log.

Lifecycle: NEW --start()--> RUNNING --stop()--> STOPPED --start()--> RUNNING
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
from collections.abc import Sequence
from pathlib import Path

from artimon.servers.base import ServerProcess, free_port
from bookkeeper.wire import advertised_address

__all__ = ["ZooKeeperServer", "four_letter_word", "pyspark_jars"]


def pyspark_jars() -> Path:
    """The ``jars`` directory of the installed pyspark wheel."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyspark is not installed: its wheel carries the ZooKeeper jars")
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    if not any(jars.glob("zookeeper-*.jar")):
        raise RuntimeError(f"no zookeeper-*.jar in {jars}")
    return jars


def four_letter_word(
    host: str, port: int, word: str = "ruok", timeout: float = 2.0, max_bytes: int = 1 << 20
) -> str:
    """Send a four-letter command and return the answer ('' if the server is not up), at
    most ``max_bytes`` of it."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks, received = [], 0
            while received < max_bytes and (chunk := sock.recv(min(65536, max_bytes - received))):
                chunks.append(chunk)
                received += len(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer(ServerProcess):
    """One standalone ZooKeeper server process (see the module doc)."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int = 0,
        *,
        host: str = "127.0.0.1",
        tick_time_ms: int = 2000,
        heap: str = "256m",
        java: str | None = None,
        jvm_options: Sequence[str] = (),
    ) -> None:
        self.jvm_options = list(jvm_options)  # e.g. a -javaagent (Jolokia, for the jmx source's tests)
        self.host = host
        self.port = port or free_port(host)
        self.tick_time_ms = tick_time_ms
        self.heap = heap
        self.java = java or shutil.which("java") or "java"
        super().__init__(
            data_dir,
            f"zookeeper server on port {self.port}",
            "zookeeper.log",
            pid_file="zookeeper.pid",
            holder=f"zookeeper launcher for port {self.port}",
        )

    @property
    def hosts(self) -> str:
        """The connect string (``host:port``), what ``ARTIMON_ZK`` would hold; for a wildcard
        bind, the address of the interface that routes outwards."""
        return f"{advertised_address(self.host)}:{self.port}"

    def _write_config(self) -> Path:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time_ms}",
                    f"dataDir={self.data_dir.resolve() / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,mntr",
                    "maxClientCnxns=0",
                    "autopurge.snapRetainCount=3",
                    "autopurge.purgeInterval=1",
                    "",
                ]
            )
        )
        return config

    def _start(self, timeout: float) -> None:
        config = self._write_config()
        command = [
            self.java,
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-Dzookeeper.admin.enableServer=false",
            *self.jvm_options,
            "-cp",
            f"{pyspark_jars()}/*",
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(config),
        ]
        self._launch(command, self._serving, timeout)

    def _serving(self) -> bool:
        answer = four_letter_word(advertised_address(self.host), self.port, "srvr", timeout=1.0)
        return answer.startswith("Zookeeper version:")
