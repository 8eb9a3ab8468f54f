"""The servers of a stack as components (:mod:`artimon.stack.supervisor`): ZooKeeper, HDFS
and Kafka, each around its launcher, each ready when its server answers."""

from __future__ import annotations

import os
from pathlib import Path

from artimon.servers import HdfsServer, KafkaCluster, ZooKeeperServer
from artimon.stack.agents import KAFKA_TOPIC
from artimon.status import forget_everything


class ZooKeeper:
    """The ensemble every part finds the others in: a server started here, or the one
    ``external`` names (``$ARTIMON_ZK``; then nothing starts). ``credentials`` says how
    other processes authenticate (``ARTIMON_ZK_AUTH_FILE=...``), for the ready line; ``None``:
    the stack runs without ACLs."""

    name = "zookeeper"

    def __init__(
        self, server: ZooKeeperServer | None, external: str | None = None, *, credentials: str | None = None
    ) -> None:
        if (server is None) == (external is None):
            raise ValueError("ZooKeeper: give a server to start or an external ensemble, not both")
        self.server = server
        self.external = external
        self.credentials = credentials
        self.forgotten: list[str] = []  # known components of a last run that was killed

    @property
    def hosts(self) -> str:
        return self.server.hosts if self.server is not None else str(self.external)

    def start(self) -> None:
        if self.server is not None:
            self.server.start()
            # its own ZooKeeper: what its last run left known died with it (killed, not stopped)
            self.forgotten = forget_everything(self.server.hosts)

    def ready_lines(self) -> list[str]:
        acls = f"; ACLs on, other processes authenticate with {self.credentials}" if self.credentials else ""
        if self.server is None:
            return [f"[ready] zookeeper  {self.external} ($ARTIMON_ZK){acls}"] if acls else []
        found = (
            "where every Artimon process looks by default"
            if self.server.port == 2181
            else f"other processes find it with ARTIMON_ZK={self.server.hosts}"
        )
        lines = [f"[ready] zookeeper  {self.server.hosts} (pid {self.server.pid}): {found}{acls}"]
        if self.forgotten:
            lines.append(
                f"[ready] zookeeper  forgot {len(self.forgotten)} components its last run left known "
                f"(it was killed): {', '.join(self.forgotten)}"
            )
        return lines

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


class Hdfs:
    """A single-node HDFS for the Parquet history; Spark's JVM, started later, reads its
    client configuration through ``HADOOP_CONF_DIR``."""

    name = "hdfs"

    def __init__(self, directory: Path, port: int) -> None:
        self.server = HdfsServer(directory, port)

    @property
    def uri(self) -> str:
        return self.server.uri

    def start(self) -> None:
        self.server.start()
        os.environ["HADOOP_CONF_DIR"] = str(self.server.conf_dir)

    def ready_lines(self) -> list[str]:
        hdfs = self.server
        return [
            f"[ready] hdfs       {hdfs.uri} (NameNode pid {hdfs.namenode_pid}, DataNode pid "
            f"{hdfs.datanode_pid}, WebHDFS {hdfs.webhdfs}) in {hdfs.started_in_s:.1f} s"
        ]

    def stop(self) -> None:
        self.server.stop()


class Kafka:
    """The broker between the polling and the storing agent: ``$ARTIMON_KAFKA``'s, or one
    node started here (its ports kept in ``cluster.json``) with the topic of samples. Sets
    ``$ARTIMON_KAFKA`` for the agents' properties."""

    name = "kafka"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.external = os.environ.get("ARTIMON_KAFKA")
        self.cluster: KafkaCluster | None = None

    def start(self) -> None:
        if self.external:
            return
        self.cluster = KafkaCluster(self.directory).start()
        self.cluster.create_topic(KAFKA_TOPIC, exist_ok=True)
        self.cluster.wait_idempotent()  # the agents' producers get their id without a retry
        os.environ["ARTIMON_KAFKA"] = self.cluster.bootstrap_servers

    def ready_lines(self) -> list[str]:
        if self.cluster is None:
            return [f"[ready] kafka      {self.external} ($ARTIMON_KAFKA): topic {KAFKA_TOPIC}"]
        return [
            f"[ready] kafka      {self.cluster.bootstrap_servers} (pid {self.cluster.pid(0)}, KRaft, "
            f"started in {self.cluster.started_in_s:.1f} s): topic {KAFKA_TOPIC}"
        ]

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
