"""A real Apache Kafka cluster in KRaft mode (no ZooKeeper) from Apache's own jars, for
``artimon kafka``, ``artimon up --kafka``, tests and benchmarks.

``KafkaCluster(data_dir, brokers=1).start()`` (every node on ``host``, 127.0.0.1 by
default, or each on its own placement: ``host=[h1, h2, h3]``) resolves
``org.apache.kafka:kafka_2.13`` once into the jar cache (:func:`resolve_jars`), gives every
node a combined ``broker,controller`` role (one node: a quorum of one; three nodes: a quorum
of three voters, so one node down keeps a majority), formats each node's storage once
(``kafka.tools.StorageTool format``, one cluster id kept in ``cluster.json`` with the
ports), runs ``java -cp <jars> kafka.Kafka node.properties`` per node and waits until every
broker answers a metadata request with itself registered (``wait_idempotent`` waits, in
addition, until an idempotent producer gets its id at once). Replication defaults follow
the size: with three brokers, internal topics and new topics get replication 3 and
``min.insync.replicas`` 2.

``stop()`` ends every node by its PID (SIGTERM, then SIGKILL after a grace period);
``kill(i)`` is ``kill -9`` of one node; ``start_node(i)`` restarts it on the same data and
ports; a stopped cluster starts again on its data (``cluster.json`` keeps the ports, so a
second ``KafkaCluster`` on the same directory finds the same cluster). Each node is a
:class:`~artimon.servers.ServerProcess`: its JVM dies with the process that launched it
(:func:`bookkeeper.ground.spawn`) and holds the node's directory
(:class:`~bookkeeper.ground.DirectoryLock`), so two clusters never share a log.

Lifecycle of a node: UNFORMATTED --format--> STOPPED --start--> RUNNING --stop/kill--> STOPPED
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from artimon.servers.base import ServerGroup, ServerProcess, Where, placed_each, wait_ready
from artimon.servers.jars import resolve_jars

__all__ = ["KAFKA_ARTIFACTS", "KAFKA_JAR_SET", "KafkaCluster", "kafka_jars", "kafka_tool_command"]

KAFKA_VERSION = "4.1.1"
KAFKA_JAR_SET = f"kafka-{KAFKA_VERSION}"
KAFKA_ARTIFACTS = (f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",)

_LOG4J = """\
status = error
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


def kafka_jars() -> list[Path]:
    """The broker's jar set (resolved with Maven on first use)."""
    return resolve_jars(KAFKA_JAR_SET, list(KAFKA_ARTIFACTS))


def kafka_tool_command(main: str, *args: str, java: str | None = None) -> list[str]:
    """``java -cp <jars> main args``: one of Kafka's own command-line tools
    (``org.apache.kafka.tools.ConsoleProducer``, ``...tools.consumer.ConsoleConsumer``...),
    whose jars (``kafka-tools``, a set of their own) are resolved on first use."""
    jars = resolve_jars(
        f"kafka-tools-{KAFKA_VERSION}", [*KAFKA_ARTIFACTS, f"org.apache.kafka:kafka-tools:{KAFKA_VERSION}"]
    )
    classpath = ":".join(str(jar) for jar in jars)
    return [
        java or shutil.which("java") or "java",
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",
        "-cp",
        classpath,
        main,
        *args,
    ]


def _cluster_id() -> str:
    """A Kafka ``Uuid`` in its text form: 16 random bytes, URL-safe base64, no padding (one
    starting with '-' would read as an option on the command line)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


@dataclass(frozen=True)
class _Layout:
    """What ``cluster.json`` keeps: the cluster id and the ports of each node."""

    cluster_id: str
    ports: tuple[int, ...]
    controller_ports: tuple[int, ...]


class _Node(ServerProcess):
    """One node of a :class:`KafkaCluster` (broker and controller): a JVM on its directory."""

    def __init__(self, cluster: KafkaCluster, index: int) -> None:
        super().__init__(
            cluster._node_dir(index),
            f"Kafka node {index + 1} on {cluster.address(index)}",
            "kafka.log",
            pid_file="kafka.pid",
            holder=f"kafka launcher for node {index + 1}",
            host=cluster.placements[index],
        )
        self._cluster = cluster
        self.index = index

    def _start(self, timeout: float) -> None:
        cluster = self._cluster
        (cluster.data_dir / "log4j2.properties").write_text(_LOG4J)
        properties = cluster._properties(self.index)
        cluster._format(self.index, properties)
        command = cluster._java("kafka.Kafka", str(properties))
        self._launch(command, lambda: cluster.answers(self.index, timeout=1.0), timeout)


class KafkaCluster(ServerGroup):
    """``brokers`` Kafka nodes on ``host`` (see the module doc): one address or placement
    for them all, or one per node (a site's hosts); each node holds its own directory."""

    start_timeout = 120.0
    stop_grace = 30.0
    _lock = None

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        brokers: int = 1,
        port: int = 0,
        *,
        host: Where | Sequence[Where] = "127.0.0.1",
        heap: str = "320m",
        partitions: int = 4,
        overrides: Mapping[str, str] | None = None,
        java: str | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"brokers {brokers} must be at least 1")
        self.data_dir = Path(data_dir)
        self.brokers = brokers
        self.placements = placed_each(host, brokers)
        self.heap = heap
        self.partitions = partitions
        self.overrides = dict(overrides or {})
        self.java = java or shutil.which("java") or "java"
        self.layout = self._load_layout(port)
        self._nodes = [_Node(self, index) for index in range(brokers)]
        self._processes = list(self._nodes)
        self.name = f"Kafka on {self.bootstrap_servers}"

    # -- layout -----------------------------------------------------------------------------

    def _load_layout(self, port: int) -> _Layout:
        saved = self.data_dir / "cluster.json"
        if saved.exists():
            data = json.loads(saved.read_text())
            layout = _Layout(data["cluster_id"], tuple(data["ports"]), tuple(data["controller_ports"]))
            if len(layout.ports) != self.brokers:
                raise ValueError(
                    f"{saved} holds a cluster of {len(layout.ports)} brokers, not {self.brokers}"
                )
            if port and layout.ports[0] != port:
                raise ValueError(f"{saved} holds a cluster on port {layout.ports[0]}, not {port}")
            return layout
        ports = tuple(port + i if port else p.port_for(9092) for i, p in enumerate(self.placements))
        layout = _Layout(_cluster_id(), ports, tuple(p.port_for(9093) for p in self.placements))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        saved.write_text(
            json.dumps(
                {
                    "cluster_id": layout.cluster_id,
                    "ports": list(layout.ports),
                    "controller_ports": list(layout.controller_ports),
                }
            )
        )
        return layout

    def _node_dir(self, index: int) -> Path:
        return self.data_dir / f"node-{index + 1}"

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of every broker: what ``kafka.bootstrap.servers`` holds."""
        return ",".join(self.address(index) for index in range(self.brokers))

    def address(self, index: int) -> str:
        return f"{self.placements[index].address}:{self.layout.ports[index]}"

    def pid(self, index: int) -> int | None:
        node = self._nodes[index]
        return node.pid if node.running else None

    def _properties(self, index: int) -> Path:
        replication = min(3, self.brokers)
        min_isr = 2 if self.brokers >= 3 else 1
        controllers = zip(self.placements, self.layout.controller_ports, strict=True)
        voters = ",".join(
            f"{i}@{placement.address}:{cport}" for i, (placement, cport) in enumerate(controllers, 1)
        )
        port, cport = self.layout.ports[index], self.layout.controller_ports[index]
        host = self.placements[index].address
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(index + 1),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{cport}",
            "advertised.listeners": f"PLAINTEXT://{host}:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str((self._node_dir(index) / "logs").resolve()),
            "num.partitions": str(self.partitions),
            "default.replication.factor": str(replication),
            "min.insync.replicas": str(min_isr),
            "offsets.topic.replication.factor": str(replication),
            "offsets.topic.num.partitions": "4",  # 50 by default: seconds of start on 2 cores
            "transaction.state.log.replication.factor": str(replication),
            "transaction.state.log.min.isr": str(min_isr),
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": str(replication),
            "share.coordinator.state.topic.min.isr": str(min_isr),
            "group.initial.rebalance.delay.ms": "0",
            # a node back from kill -9 registers again only once its old session ended (9 s
            # by default); a down node's partitions also move sooner
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
            "unclean.leader.election.enable": "false",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "background.threads": "4",
            "log.cleaner.threads": "1",
            **self.overrides,
        }
        path = self._node_dir(index) / "node.properties"
        path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        return path

    # -- lifecycle --------------------------------------------------------------------------

    def _java(self, main: str, *args: str) -> list[str]:
        classpath = ":".join(str(jar) for jar in kafka_jars())
        return [
            self.java,
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # C1 only: a broker here starts in half the time
            f"-Dlog4j2.configurationFile={(self.data_dir / 'log4j2.properties').resolve()}",
            "-cp",
            classpath,
            main,
            *args,
        ]

    def _format(self, index: int, properties: Path) -> None:
        if (self._node_dir(index) / "logs" / "meta.properties").exists():
            return
        command = self._java(
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self.layout.cluster_id,
            "-c",
            str(properties),
            "--ignore-formatted",
        )
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(
                f"formatting Kafka node {index + 1} failed ({done.returncode}): "
                f"{(done.stdout + done.stderr).strip()[-2000:]}"
            )

    def _start(self, timeout: float) -> None:
        """Start every node that is not running (formatting it once) and wait until all answer."""
        for node in self._nodes:
            node.start(timeout=0)
        self.wait_ready(range(self.brokers), timeout)

    def start_node(self, index: int, timeout: float = 120.0) -> None:
        """Start one node again on its data (after ``kill`` or ``stop_node``) and wait for it."""
        self._nodes[index].start(timeout=0)
        self.wait_ready([index], timeout)

    def answers(self, index: int, timeout: float = 2.0) -> bool:
        """Whether node ``index`` answers a metadata request listing itself as a broker."""
        from confluent_kafka.admin import AdminClient  # librdkafka loads only when a cluster is used

        admin = AdminClient({"bootstrap.servers": self.address(index), "log_level": 0})
        try:
            metadata = admin.list_topics(timeout=timeout)
        except Exception:  # KafkaException while the broker starts: not ready yet
            return False
        return index + 1 in metadata.brokers

    def wait_ready(self, indexes: Sequence[int], timeout: float = 120.0) -> None:
        """Wait until every node of ``indexes`` answers; ``RuntimeError`` with the logs if one
        exits first or they do not within ``timeout`` seconds."""
        nodes = [self._nodes[index] for index in indexes]
        wait_ready(
            nodes,
            lambda: all(self.answers(node.index, timeout=1.0) for node in nodes),
            timeout,
            ", ".join(node.name for node in nodes),
            poll=0.2,
        )

    def wait_idempotent(self, timeout: float = 60.0) -> None:
        """Wait until the cluster hands an idempotent producer its producer id. A KRaft broker
        fetches its first block of ids from the controller only when a producer first asks,
        answering "coordinator load in progress" meanwhile, so every producer started first
        would log a retry: a silent probe producer asks first. ``RuntimeError`` after
        ``timeout`` seconds."""
        from confluent_kafka import Producer

        state: list[str] = []

        def seen(stats: str) -> None:
            state.append(json.loads(stats).get("eos", {}).get("idemp_state", ""))

        probe = Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "enable.idempotence": True,
                "statistics.interval.ms": 100,
                "log_level": 0,  # its own "retrying" lines are the wait this method is
                "stats_cb": seen,
            }
        )
        deadline = time.monotonic() + timeout
        while not state or state[-1] != "Assigned":
            if time.monotonic() > deadline:
                where = self.bootstrap_servers
                raise RuntimeError(f"no producer id from {where} within {timeout} s (state {state[-1:]})")
            probe.poll(0.1)

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        config: Mapping[str, str] | None = None,
        *,
        exist_ok: bool = False,
    ) -> None:
        """Create topic ``name`` (``partitions`` default the cluster's, replication by its size)
        and wait until every broker knows it; with ``exist_ok``, a topic already there is left
        as it is."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        topic = NewTopic(
            name,
            num_partitions=partitions or self.partitions,
            replication_factor=min(3, self.brokers),
            config=dict(config or {}),
        )
        try:
            admin.create_topics([topic], operation_timeout=30)[name].result(timeout=60)
        except KafkaException as exc:
            if not (exist_ok and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS):
                raise
            return
        deadline = time.monotonic() + 30
        while True:
            topics = admin.list_topics(timeout=5).topics
            known = topics.get(name)
            if known is not None and known.error is None and len(known.partitions) == topic.num_partitions:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {name!r} did not appear within 30 s")
            time.sleep(0.1)

    def kill(self, index: int) -> int:
        """``kill -9`` node ``index``; its PID. The node's directory stays held by the launcher."""
        return self._nodes[index].kill()

    def stop_node(self, index: int, grace: float | None = None) -> None:
        """Stop one node by its PID: SIGTERM (a controlled shutdown), SIGKILL after ``grace``."""
        self._nodes[index].stop(grace)

    def stop(self, grace: float | None = None) -> None:
        """Stop every node and let the data directories go; SIGTERM reaches all at once first,
        so that no node waits on a quorum already gone."""
        for node in self._nodes:
            if node.running and node.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(node.pid, signal.SIGTERM)
        super().stop(grace)
