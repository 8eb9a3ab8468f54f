"""The grown-up topology on a site's hosts, every part a real server in its host's namespace,
binding its host's address.

:class:`Layout` says which host runs what; :meth:`Layout.of` spreads the parts over eight
hosts or more::

    h1  zookeeper  kafka  vhms s1       hdfs namenode
    h2  zookeeper  kafka  vhms s1       hdfs datanode
    h3  zookeeper  kafka  vhms s2       hdfs datanode
    h4                    vhms s2       history driver query api
    h5  store agents (2)                               query api
    h6  apps + polling agent            spark master
    h7  apps + polling agent            spark worker
    h8  apps + polling agent            spark worker   (h9... more app hosts)

:class:`Topology` starts it on a :class:`~artimon.site.Site`, each stage once the one before
is ready (the Java servers side by side): a ZooKeeper ensemble of 3; a Kafka cluster of 3
brokers (KRaft; replication 3, ``min.insync.replicas=2``) with the topic of samples, HDFS
(a NameNode and 2 DataNodes, replication 2) and a Spark standalone master with 2 workers;
VHMS 2 shards x 2 replicas (the agents' ``vhms`` sink writes every member of a shard); 2
store agents (one Kafka consumer group into VHMS, each with a durable channel), the query
API on 2 hosts and the raw history (:func:`~artimon.site.history.history_job`: Spark's
``raw_ingest --kafka``, its driver on h4, its executor on the site's Spark cluster, the
topic into Parquet on the site's HDFS, a micro-batch every ``history_interval`` seconds;
started with the store agents, awaited last: ready once its session is up, registered with
the Spark master); on each app host, the applications, then a polling agent of one
agent group ``site`` (the group shares the endpoints: an agent lost, its endpoints are
polled by the others) publishing each round onto Kafka through a durable channel. Last,
what ``artimon status --zk <ensemble>`` probes and that does not register itself (Kafka,
HDFS, the Spark master: :class:`ServiceRegistrations`); the agents, the query APIs and the
VHMS members register themselves.

Each process's files are under ``data_dir/<host>/<component>`` (Kafka's, ZooKeeper's, HDFS's
and Spark's under their own launcher's directory); its agent properties are written there.
The raw history reads the topic :data:`~artimon.stack.KAFKA_TOPIC` with its offsets in its
checkpoint (no consumer group): nothing here produces landing files.

Lifecycle: NEW --start()--> RUNNING --(the site's stop())--> STOPPED.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from artimon.servers import (
    AgentServer,
    CommandServer,
    HdfsServer,
    KafkaCluster,
    Launcher,
    QueryApiServer,
    SparkCluster,
    VhmsShard,
    ZooKeeperEnsemble,
    answers_ok,
    wait_ready,
)
from artimon.site.agents import polling_agent, store_agent
from artimon.site.history import history_job
from artimon.site.hosts import Host
from artimon.site.site import Site
from artimon.stack import KAFKA_TOPIC, resolutions_for
from artimon.status import register_service
from bookkeeper.zk import Registration

__all__ = ["MIN_HOSTS", "Layout", "Topology", "demo_apps"]

MIN_HOSTS = 8
SHARDS = ("s1", "s2")
GROUP = "site"  # the polling agents' group

AppsCommand = Callable[[Host, str], list[str]]  # (host, ZooKeeper connect string) -> command


def demo_apps(host: Host, zk: str) -> list[str]:
    """The demo applications (``python -m artimon.demo``) on ``host``."""
    return [sys.executable, "-m", "artimon.demo", "--zk", zk, "--host", host.address]


@dataclass(frozen=True)
class Layout:
    """Which host (by name) runs what (see the module doc)."""

    zookeeper: tuple[str, ...]
    kafka: tuple[str, ...]
    vhms: tuple[tuple[str, str], ...]  # (shard, host) of every member
    store_agents: str
    apis: tuple[str, ...]
    app_hosts: tuple[str, ...]
    namenode: str
    datanodes: tuple[str, ...]
    spark_master: str
    spark_workers: tuple[str, ...]
    history: str  # the history job's driver

    @classmethod
    def of(cls, hosts: int) -> Layout:
        """The module doc's layout on ``hosts`` hosts (8 or more; past 8, more app hosts)."""
        if hosts < MIN_HOSTS:
            raise ValueError(f"the full topology needs {MIN_HOSTS} hosts or more, not {hosts}")
        return cls(
            zookeeper=("h1", "h2", "h3"),
            kafka=("h1", "h2", "h3"),
            vhms=(("s1", "h1"), ("s1", "h2"), ("s2", "h3"), ("s2", "h4")),
            store_agents="h5",
            apis=("h4", "h5"),
            app_hosts=tuple(f"h{i}" for i in range(6, hosts + 1)),
            namenode="h1",
            datanodes=("h2", "h3"),
            spark_master="h6",
            spark_workers=("h7", "h8"),
            history="h4",
        )


class ServiceRegistrations(Launcher):
    """The registrations (``/services/<kind>/<name>``, what ``artimon status`` probes) of the
    servers that do not register themselves: Kafka (its brokers expected), HDFS (its
    DataNodes) and the Spark master (its workers), made by the launcher that started them;
    the site stops it first."""

    name = "the site's service registrations"
    _lock = None

    def __init__(self, zk: str, services: list[tuple[str, str, int]]) -> None:
        self.zk = zk
        self.services = services  # (kind, url, members expected)
        self.registrations: list[Registration] = []

    @property
    def running(self) -> bool:
        return bool(self.registrations)

    def exited(self) -> list[str]:
        return [] if self.running else [self.name]

    def _start(self, timeout: float) -> None:
        for kind, url, expect in self.services:
            name = url.split("://", 1)[-1].split("/", 1)[0].split(",", 1)[0]
            self.registrations.append(register_service(self.zk, kind, name, url, expect=expect))

    def stop(self, grace: float | None = None) -> None:
        for registration in self.registrations:
            registration.close()
        self.registrations = []


class Topology:
    """The topology of ``layout`` on ``site`` (see the module doc): agents poll every
    ``interval`` seconds; each app host runs ``apps(host, zk)``, which prints ``READY`` lines
    (``app_ready_lines`` of them) once it serves; the history job runs a micro-batch every
    ``history_interval`` seconds."""

    def __init__(
        self,
        site: Site,
        layout: Layout,
        *,
        interval: float = 5.0,
        apps: AppsCommand = demo_apps,
        app_ready_lines: int = 1,
        history_interval: float = 30.0,
    ) -> None:
        self.site = site
        self.layout = layout
        self.interval = interval
        self.apps_command = apps
        self.app_ready_lines = app_ready_lines
        root = site.data_dir
        self.zookeeper = ZooKeeperEnsemble(root / "zookeeper", self._hosts(layout.zookeeper))
        self.kafka = KafkaCluster(root / "kafka", 3, host=self._hosts(layout.kafka), heap="256m")
        namenode, datanodes = site.host(layout.namenode), self._hosts(layout.datanodes)
        self.hdfs = HdfsServer(root / "hdfs", host=namenode, datanodes=datanodes, heap="192m")
        self.spark = SparkCluster(
            root / "spark",
            host=site.host(layout.spark_master),
            workers=self._hosts(layout.spark_workers),
            worker_cores=1,
            worker_memory="512m",
            daemon_heap="192m",
        )
        history = site.host(layout.history)
        self.history = history_job(
            self._dir(history.name, "history"),
            history,
            self.spark,
            self.kafka,
            self.hdfs,
            f"{history_interval:g} seconds",
        )
        self.vhms: list[VhmsShard] = []
        self.apis: list[QueryApiServer] = []
        self.store_agents: list[AgentServer] = []
        self.apps: dict[str, CommandServer] = {}
        self.polling_agents: dict[str, AgentServer] = {}

    def _hosts(self, names: tuple[str, ...]) -> list[Host]:
        return [self.site.host(name) for name in names]

    def _dir(self, host: str, component: str) -> Path:
        return self.site.data_dir / host / component

    @property
    def zk(self) -> str:
        """The ensemble's connect string."""
        return self.zookeeper.hosts

    def start(self, timeout: float = 300.0) -> Topology:
        """Start every part, stage by stage (see the module doc); ``RuntimeError`` with the
        log of a part that is not ready within ``timeout`` seconds."""
        site, layout = self.site, self.layout
        site.add(self.zookeeper, ["zookeeper"] * 3)
        self.zookeeper.start(timeout)
        site.add(self.kafka, ["kafka"] * 3)
        site.add(self.hdfs, [*(["hdfs datanode"] * len(layout.datanodes)), "hdfs namenode"])
        site.add(self.spark, [*(["spark worker"] * len(layout.spark_workers)), "spark master"])
        resolutions = resolutions_for(self.interval)
        for shard, host in layout.vhms:
            directory = self._dir(host, f"vhms-{shard}")
            member = VhmsShard(directory, shard, self.zk, host=site.host(host), resolutions=resolutions)
            self.vhms.append(site.add(member, [f"vhms {shard}"]))
        site.start_together([self.kafka, self.hdfs, self.spark, *self.vhms], timeout)
        self.kafka.create_topic(KAFKA_TOPIC, exist_ok=True)
        self.kafka.wait_idempotent()
        # the history job's session comes up while the next stages start (half a minute or
        # more on a loaded machine): awaited last
        site.add(self.history, ["history"]).start(timeout=0)
        self._start_consumers(timeout)
        self._start_app_hosts(timeout)
        wait_ready([self.history], lambda: answers_ok(self.history.health), timeout, self.history.name)
        services = [
            ("kafka", f"kafka://{self.kafka.bootstrap_servers}", len(layout.kafka)),
            ("hdfs", self.hdfs.webhdfs, len(layout.datanodes)),
            ("spark", self.spark.web_url, len(layout.spark_workers)),
        ]
        site.add(ServiceRegistrations(self.zk, services), []).start(timeout)
        return self

    def _start_consumers(self, timeout: float) -> None:
        """The store agents and the query APIs."""
        host = self.site.host(self.layout.store_agents)
        for k in (1, 2):
            directory = self._dir(host.name, f"store-agent-{k}")
            directory.mkdir(parents=True, exist_ok=True)
            properties = directory / "agent.properties"
            properties.write_text(store_agent(self.zk, self.kafka.bootstrap_servers, directory))
            agent = AgentServer(directory, properties, "store", host=host, zk=self.zk, monitor_port=41414 + k)
            self.store_agents.append(self.site.add(agent, [f"store agent {k}"]))
        for name in self.layout.apis:
            api = QueryApiServer(self._dir(name, "api"), self.zk, host=self.site.host(name))
            self.apis.append(self.site.add(api, ["query api"]))
        self.site.start_together([*self.store_agents, *self.apis], timeout)

    def _start_app_hosts(self, timeout: float) -> None:
        """On each app host, the applications, then its polling agent."""
        for name in self.layout.app_hosts:
            host = self.site.host(name)
            apps = CommandServer(
                self._dir(name, "apps"),
                f"the applications of {name}",
                self.apps_command(host, self.zk),
                host=host,
                ready_lines=self.app_ready_lines,
            )
            self.apps[name] = self.site.add(apps, ["apps"])
        self.site.start_together(list(self.apps.values()), timeout)
        for name in self.layout.app_hosts:
            directory = self._dir(name, "polling-agent")
            directory.mkdir(parents=True, exist_ok=True)
            properties = directory / "agent.properties"
            text = polling_agent(self.zk, self.kafka.bootstrap_servers, directory, GROUP, name, self.interval)
            properties.write_text(text)
            agent = AgentServer(directory, properties, "poll", host=self.site.host(name))
            self.polling_agents[name] = self.site.add(agent, ["polling agent"])
        self.site.start_together(list(self.polling_agents.values()), timeout)
