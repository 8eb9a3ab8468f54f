"""The agent(s) of ``artimon up`` as one component: their properties file (written at the
first start by :mod:`artimon.stack.agents`, re-read on change), the ``${...}`` it uses set
in the environment, a monitoring server, and the self-report the agent polls like any app.

With Kafka there are two agents in one file: ``store`` starts first (it is ready when the
first round is published), ``up`` second; on stop ``up`` stops first, then ``store`` takes
what was published (:func:`drain_kafka`), then stops. ``metrics()`` is both agents' counters
as one agent's (their component names differ); they share one round ledger (the polling
agent's expectations, the store agent's commits), served on ``/ledger``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from artimon.servers import free_port
from artimon.stack.agents import kafka_agents, up_agent
from artimon.stack.api import QueryApi
from artimon.stack.servers import ZooKeeper
from artimon.stack.vhms import Vhms
from bookkeeper.ground import WebConfig
from collector_agent import Agent, ConfigWatcher, MonitorServer, RoundLedger, SelfReporter


def drain_kafka(agent: Agent, store_agent: Agent, timeout: float = 30.0) -> str:
    """Once the polling agent has stopped (what it committed is on the topic), wait until
    each Kafka source of the store agent has taken as many events as were published and
    its channels are empty, so that a stop leaves the last rounds in VHMS and the landing
    files rather than in Kafka (which keeps them for the next start if ``timeout`` passes
    first); a line to print."""
    published = sum(
        c.get("EventDrainSuccessCount", 0) for k, c in agent.metrics().items() if k.startswith("SINK.")
    )
    started = time.monotonic()

    def drained() -> bool:
        now = store_agent.metrics()
        taken = [
            c["EventAcceptedCount"]
            for k, c in now.items()
            if k.startswith("SOURCE.") and "KafkaEmptyCount" in c
        ]
        waiting = sum(c.get("ChannelSize", 0) for k, c in now.items() if k.startswith("CHANNEL."))
        return all(count >= published for count in taken) and waiting == 0

    while not drained():
        if time.monotonic() - started > timeout:
            return (
                f"kafka: the store agent had not taken all {int(published)} published events in "
                f"{timeout:g} s: the rest waits in Kafka for the next start"
            )
        time.sleep(0.1)  # counters to poll: no event to wait on
    took = time.monotonic() - started
    return f"kafka: the store agent took all {int(published)} published events ({took:.1f} s)"


class Agents:
    """See the module doc."""

    name = "agent"

    def __init__(
        self,
        zookeeper: ZooKeeper,
        vhms: Vhms,
        api: QueryApi,
        data: Path,
        *,
        interval: float,
        host: str,
        thrift_port: int,
        kafka: bool,
        web_config: WebConfig | None = None,
    ) -> None:
        self.web_config = web_config
        self.zookeeper, self.vhms, self.api, self.data = zookeeper, vhms, api, data
        self.interval = interval
        self.host = host
        self.thrift_port = thrift_port or free_port()
        self.kafka = kafka
        self.properties = data / ("agents-kafka.properties" if kafka else "agent.properties")
        self.agent: Agent | None = None
        self.store_agent: Agent | None = None
        self._watchers: dict[str, ConfigWatcher] = {}
        self.monitor: MonitorServer | None = None
        self.ledger = RoundLedger()
        self.reporter: SelfReporter | None = None

    def _environment(self, monitor_port: int) -> None:
        scheme = self.web_config.scheme if self.web_config is not None else "http"
        os.environ.update(
            ARTIMON_API_METRICS=f"{self.api.url}/metrics",
            ARTIMON_VHMS_METRICS=self.vhms.metrics_url,
            ARTIMON_AGENT_METRICS=f"{scheme}://{self.host}:{monitor_port}/metrics?format=prometheus",
            ARTIMON_ZK=self.zookeeper.hosts,
            ARTIMON_INTERVAL=f"{self.interval:g}",
            ARTIMON_ROLL_INTERVAL=str(max(5, int(self.interval * 2))),
            ARTIMON_THRIFT_PORT=str(self.thrift_port),
            ARTIMON_HOST=self.host,
        )

    def _start_agent(self, name: str) -> Agent:
        agent = Agent.from_properties(self.properties.read_text(), name, ledger=self.ledger)
        agent.start()
        watcher = ConfigWatcher(agent, self.properties, interval=min(5.0, self.interval))
        watcher.start()
        self._watchers[name] = watcher
        return agent

    def metrics(self) -> dict[str, dict[str, float]]:
        """The counters of the agents running (none before they start)."""
        return {
            group: counters
            for agent in (self.agent, self.store_agent)
            if agent is not None
            for group, counters in agent.metrics().items()
        }

    def start(self) -> None:
        (self.data / "run").mkdir(parents=True, exist_ok=True)
        monitor_port = free_port(self.host)
        self._environment(monitor_port)
        if not self.properties.exists():
            self.properties.write_text(kafka_agents() if self.kafka else up_agent())
        # the agents' /metrics serves before the agents start: their first scrape of it answers
        self.monitor = MonitorServer(
            self.metrics, "up", self.host, monitor_port, web_config=self.web_config, ledger=self.ledger
        )
        self.monitor.start()
        if self.kafka:  # the store side first: it is ready when the first round is published
            self.store_agent = self._start_agent("store")
        self.agent = self._start_agent("up")
        self.reporter = SelfReporter(self.metrics, self.agent.name)
        self.reporter.start()
        self.reporter.bookkeeper.serve(zk_hosts=self.zookeeper.hosts)  # polled like any app

    def ready_lines(self) -> list[str]:
        monitor = self.monitor.url if self.monitor else "-"
        return [
            f"[ready] agent      every {self.interval:g} s from {self.properties} (edit it: it reloads), "
            f"metrics on {monitor}/metrics and in VHMS as flume.*; "
            f".artimon files in {self.data / 'run'}; "
            f"Flume Thrift on {self.host}:{self.thrift_port}. Ctrl-C stops everything"
        ]

    def stop(self) -> str | None:
        """The polling side first (its channels closed, its last landing file rolled), then
        the store side once it took what was published; the drain's line with Kafka."""
        for part in (self._watchers.get("up"), self.agent):
            if part is not None:
                part.stop()
        drained = None
        if self.agent is not None and self.store_agent is not None:
            drained = drain_kafka(self.agent, self.store_agent)
        # /metrics last: the store agent scrapes it until it stops
        for rest in (self._watchers.get("store"), self.store_agent, self.monitor, self.reporter):
            if rest is not None:
                rest.stop()
        if self.reporter is not None:
            self.reporter.bookkeeper.close()
        return drained
