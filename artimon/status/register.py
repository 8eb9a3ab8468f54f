"""The light registration of what does not register itself in ZooKeeper: an agent's monitoring,
a query API, and the servers a launcher runs (Kafka, a Spark master, HDFS), each an
ephemeral ``/services/<kind>/<name>`` holding its URL (:class:`ServiceInfo`), made by the
process that serves it, or for a server it launched, by the launcher on that host (``artimon
up`` for its own, a site's topology for its own: ``artimon.site.Topology``; ``artimon
kafka`` and ``artimon hdfs`` with ``$ARTIMON_ZK`` set). It lives as long as the process's
session and comes back after a session expiry (:class:`bookkeeper.zk.Registration`); its
parent stays, so a kind left empty says that its last member is gone. It is remembered in
``/known/services/<kind>/<name>`` until a clean stop, so a process killed or cut off reads as
missing (:mod:`artimon.status.known`).

:class:`StackRegistrations` is ``artimon up``'s: the last component to start, the first to
stop, it registers what the stack runs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from artimon.status.model import ServiceInfo
from bookkeeper.zk import Registration, resolve_zk

if TYPE_CHECKING:  # a type only: a query API registering itself imports no agent
    from artimon.stack import Agents, Hdfs, History, Kafka, QueryApi, ZooKeeper
    from collector_agent import Agent

__all__ = ["StackRegistrations", "agent_service", "launcher_service", "register_service"]


def _address_of(url: str) -> str:
    """The first ``host:port`` of ``url`` (Kafka's names several): a service's name."""
    return url.split("://", 1)[-1].split("/", 1)[0].split(",", 1)[0]


def register_service(
    zk_hosts: str | None,
    kind: str,
    name: str,
    url: str,
    *,
    members: Sequence[str] = (),
    expect: int = 0,
    session_timeout: float = 10.0,
) -> Registration:
    """Register ``/services/<kind>/<name>`` (see the module doc) in ``zk_hosts`` (default
    ``$ARTIMON_ZK``) with the process's credentials; ``ValueError`` for a payload that
    ``artimon status`` would refuse."""
    connect, layout = resolve_zk(zk_hosts)
    host = name.rpartition(":")[0] or name
    payload = ServiceInfo(kind, name, url, host, int(time.time() * 1000), list(members), expect).to_json()
    ServiceInfo.from_json(payload)
    path = layout.service(kind, name)
    known = layout.known_record(path)
    registration = Registration(connect, path, payload, session_timeout=session_timeout, known=known)
    registration.start()
    return registration


def agent_service(agents: Sequence[Agent], zk_hosts: str | None, url: str) -> Registration | None:
    """Register the monitoring at ``url`` of ``agents`` (one process's), with the group
    memberships they hold, in ``zk_hosts``, else in the ZooKeeper of their first
    membership; ``None`` when neither is known."""
    memberships = [m for agent in agents for m in agent.memberships()]
    zk = zk_hosts or (memberships[0][0] if memberships else None)
    if zk is None:
        return None
    return register_service(
        zk, "agent", _address_of(url), url, members=[f"{g}/{a}" for _, g, a in memberships]
    )


def launcher_service(kind: str, url: str, expect: int) -> Registration | None:
    """A launcher's registration of the server it runs (``artimon kafka``, ``artimon
    hdfs``), in ``$ARTIMON_ZK`` when it is set (else ``None``: a server of its own)."""
    zk = os.environ.get("ARTIMON_ZK")
    if not zk:
        return None
    return register_service(zk, kind, _address_of(url), url, expect=expect)


class StackRegistrations:
    """``artimon up``'s registrations (see the module doc): its agents' monitoring, its
    query API, and the Kafka broker, HDFS and Spark master it started."""

    name = "registrations"

    def __init__(
        self,
        zookeeper: ZooKeeper,
        agents: Agents,
        api: QueryApi,
        *,
        kafka: Kafka | None = None,
        hdfs: Hdfs | None = None,
        history: History | None = None,
    ) -> None:
        self.zookeeper, self.agents, self.api = zookeeper, agents, api
        self.kafka, self.hdfs, self.history = kafka, hdfs, history
        self.registrations: list[Registration] = []

    def start(self) -> None:
        zk = self.zookeeper.hosts
        running = [a for a in (self.agents.agent, self.agents.store_agent) if a is not None]
        if self.agents.monitor is not None:
            agent = agent_service(running, zk, self.agents.monitor.url)
            self.registrations += [agent] if agent is not None else []
        wanted = [("api", self.api.url, 0)]
        if self.kafka is not None and self.kafka.cluster is not None:
            wanted.append(("kafka", f"kafka://{self.kafka.cluster.bootstrap_servers}", 1))
        if self.hdfs is not None:
            wanted.append(("hdfs", self.hdfs.server.webhdfs, 1))
        if self.history is not None and self.history.job.cluster is not None:
            wanted.append(("spark", self.history.job.cluster.web_url, 1))
        for kind, url, expect in wanted:
            self.registrations.append(register_service(zk, kind, _address_of(url), url, expect=expect))

    def ready_lines(self) -> list[str]:
        count = len(self.registrations)
        return [f"[ready] status     {count} services registered: artimon status shows them"]

    def stop(self) -> None:
        for registration in self.registrations:
            registration.close()
        self.registrations = []
