"""The embedded stack as a declared list of components under one supervisor (``artimon up``,
and the test stack of ``artimon.testing``), and the one builder of agent properties.

| concept | file |
|---|---|
| the supervisor, its states, the component protocol | ``supervisor.py`` |
| an agent's properties text from named parts | ``properties.py`` |
| the properties of ``up``'s agent(s) | ``agents.py`` |
| ZooKeeper, HDFS, Kafka as components | ``servers.py`` |
| the stack's ZooKeeper credentials (``<data-dir>/zk.auth``) | ``credentials.py`` |
| ``--web.config.file`` on every HTTP port, the self-scrape's own user | ``webconfig.py`` |
| VHMS in process, its rings, its write-ahead log options | ``vhms.py`` |
| the demo applications | ``apps.py`` |
| the query API and dashboards | ``api.py`` |
| the alerting rules, the line per alert state change | ``alerts.py`` |
| ``up``'s gauges: the landing backlog, ZooKeeper's ``mntr`` | ``metrics.py`` |
| Spark's raw_ingest and the backfill of an empty VHMS | ``history.py`` |
| the agent(s), their monitoring and self-report | ``agent.py`` |
| the line per round | ``rounds.py`` |
"""

from __future__ import annotations

from artimon.stack.agent import Agents
from artimon.stack.agents import KAFKA_TOPIC, kafka_agents, up_agent
from artimon.stack.alerts import Alerts, report_evaluation
from artimon.stack.api import READY_QUERY, QueryApi
from artimon.stack.apps import Demo
from artimon.stack.credentials import CREDENTIALS_FILE, stack_credentials
from artimon.stack.history import History
from artimon.stack.metrics import LandingBacklog, ZooKeeperMetrics
from artimon.stack.properties import agent_properties
from artimon.stack.rounds import report_rounds
from artimon.stack.servers import Hdfs, Kafka, ZooKeeper
from artimon.stack.supervisor import Component, State, Supervisor
from artimon.stack.vhms import Vhms, WalOptions, resolutions_for
from artimon.stack.webconfig import SELF_USER, stack_web_config

__all__ = [
    "CREDENTIALS_FILE",
    "KAFKA_TOPIC",
    "READY_QUERY",
    "SELF_USER",
    "Agents",
    "Alerts",
    "Component",
    "Demo",
    "Hdfs",
    "History",
    "Kafka",
    "LandingBacklog",
    "QueryApi",
    "State",
    "Supervisor",
    "Vhms",
    "WalOptions",
    "ZooKeeper",
    "ZooKeeperMetrics",
    "agent_properties",
    "kafka_agents",
    "report_evaluation",
    "report_rounds",
    "resolutions_for",
    "stack_credentials",
    "stack_web_config",
    "up_agent",
]
