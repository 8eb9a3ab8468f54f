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

An ensemble (:class:`ZooKeeperEnsemble`) is one such server per address, each told the
others (``server.<id>=<address>:2888:3888`` lines, its ``myid`` file; members sharing one
address, say 127.0.0.1 in a test, get free client and quorum ports each) and run by
``QuorumPeerMain``; each on a placement of its own (a site's host, see :mod:`artimon.site`).
A member is ready once the quorum has it (``srvr`` answers ``Mode: leader`` or ``Mode:
follower``).

Lifecycle: NEW --start()--> RUNNING --stop()--> STOPPED --start()--> RUNNING
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
from collections.abc import Sequence
from pathlib import Path

from artimon.servers.base import ServerGroup, ServerProcess, Where, free_port, placed, placed_each, wait_ready
from bookkeeper.wire import advertised_address

__all__ = ["QUORUM_PORTS", "ZooKeeperEnsemble", "ZooKeeperServer", "four_letter_word", "pyspark_jars"]

QUORUM_PORTS = (2888, 3888)  # an ensemble member's peer and leader-election ports, on its own address


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
    """One ZooKeeper server process (see the module doc): standalone, or with ``peers`` (the
    ensemble's addresses, ``server_id`` its 1-based place among them) a member of an ensemble;
    ``host`` is an address here or a placement."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int = 0,
        *,
        host: Where = "127.0.0.1",
        tick_time_ms: int = 2000,
        heap: str = "256m",
        java: str | None = None,
        jvm_options: Sequence[str] = (),
        peers: Sequence[str] = (),
        server_id: int = 0,
    ) -> None:
        if peers and not 1 <= server_id <= len(peers):
            raise ValueError(f"server_id {server_id} is not one of the ensemble's 1..{len(peers)}")
        self.peers = list(peers)
        self.server_id = server_id
        self.jvm_options = list(jvm_options)  # e.g. a -javaagent (Jolokia, for the jmx source's tests)
        placement = placed(host)
        self.host = placement.address
        self.port = port or placement.port_for(2181)
        self.tick_time_ms = tick_time_ms
        self.heap = heap
        self.java = java or shutil.which("java") or "java"
        where = f"{self.host}:{self.port}" if peers else f"port {self.port}"
        super().__init__(
            data_dir,
            f"zookeeper server on {where}",
            "zookeeper.log",
            pid_file="zookeeper.pid",
            holder=f"zookeeper launcher for {self.host}:{self.port}",
            host=placement,
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
                    *self._quorum_lines(),
                    "",
                ]
            )
        )
        return config

    def _quorum_lines(self) -> list[str]:
        if not self.peers:
            return []
        (self.data_dir / "data" / "myid").write_text(f"{self.server_id}\n")
        peer, election = QUORUM_PORTS
        servers = [
            f"server.{i}={address}" if address.count(":") == 2 else f"server.{i}={address}:{peer}:{election}"
            for i, address in enumerate(self.peers, 1)
        ]
        return ["initLimit=10", "syncLimit=5", *servers]

    def _start(self, timeout: float) -> None:
        config = self._write_config()
        main = "QuorumPeerMain" if self.peers else "ZooKeeperServerMain"
        command = [
            self.java,
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-Dzookeeper.admin.enableServer=false",
            *self.jvm_options,
            "-cp",
            f"{pyspark_jars()}/*",
            f"org.apache.zookeeper.server{'.quorum' if self.peers else ''}.{main}",
            str(config),
        ]
        self._launch(command, self._serving, timeout)

    def _serving(self) -> bool:
        answer = four_letter_word(advertised_address(self.host), self.port, "srvr", timeout=1.0)
        return answer.startswith("Zookeeper version:")

    def mode(self) -> str:
        """``leader``, ``follower`` or ``standalone`` while it serves, else ``''``."""
        answer = four_letter_word(advertised_address(self.host), self.port, "srvr", timeout=1.0)
        for line in answer.splitlines():
            if line.startswith("Mode: "):
                return line.removeprefix("Mode: ").strip()
        return ""


class ZooKeeperEnsemble(ServerGroup):
    """A ZooKeeper ensemble of one member per host (see the module doc), the member on
    ``hosts[i]`` (an address here or a placement) in ``data_dir/zk<i+1>``; started once every
    member serves (a quorum and a leader). Kill or restart one through :attr:`members`."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        hosts: Sequence[Where],
        *,
        port: int = 2181,
        tick_time_ms: int = 1000,
        heap: str = "192m",
    ) -> None:
        placements = placed_each(hosts, len(hosts))
        addresses = [placement.address for placement in placements]
        self.name = f"zookeeper ensemble of {len(addresses)}"
        self._lock = None  # each member holds its own directory
        self.port = port
        shared = len(set(addresses)) < len(addresses)  # members on one address: ports of their own
        peers = [f"{a}:{free_port(a)}:{free_port(a)}" for a in addresses] if shared else list(addresses)
        self.members = [
            ZooKeeperServer(
                Path(data_dir) / f"zk{i}",
                0 if shared else port,
                host=placement,
                tick_time_ms=tick_time_ms,
                heap=heap,
                peers=peers,
                server_id=i,
            )
            for i, placement in enumerate(placements, 1)
        ]
        self._processes = list[ServerProcess](self.members)

    @property
    def hosts(self) -> str:
        """The connect string of every member."""
        return ",".join(f"{member.host}:{member.port}" for member in self.members)

    def leader(self) -> ZooKeeperServer | None:
        """The member that says it leads, if one does."""
        return next((member for member in self.members if member.mode() == "leader"), None)

    def _start(self, timeout: float) -> None:
        for member in self.members:
            if not member.running:
                member.start(timeout=0)  # none serves before a quorum runs: wait on them all
        if timeout:
            wait_ready(self.members, lambda: all(m._serving() for m in self.members), timeout, self.name)
