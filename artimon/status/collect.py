"""``collect()``: the whole view in about one timeout (two at worst), even with hosts down.

ZooKeeper's members are asked ``srvr`` while its tree is read; then every process the tree
names is probed, all at once on a pool of threads, each probe bounded by ``timeout``. What
is degraded is judged from the answers (:func:`findings`):

- a ZooKeeper member: it does not answer ``srvr``, or serves without a quorum;
- the ensemble: no member says it leads (a standalone server leads itself);
- the registry: no member took a session, so nothing registered can be read;
- an agent group: endpoints are registered and no agent of the group is alive;
- an agent: its monitoring does not answer; its next round is overdue by more than an
  interval; a channel is 90 % full or more;
- a VHMS shard: no replica is registered; a replica does not answer; its replicas disagree
  (series held, or newest bucket);
- a service (API, Kafka, Spark, HDFS): none of its kind is registered any more; it does not
  answer; fewer of its members (brokers, workers, DataNodes) are alive than it expects;
- a component (an agent's group membership, a VHMS member, a service) is known and not
  registered now: missing (:mod:`artimon.status.known`); a known record does not parse.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor

import httpx

from artimon.status.known import missing_components
from artimon.status.model import (
    AgentGroup,
    AgentProcess,
    Finding,
    GroupMember,
    Missing,
    Replica,
    Service,
    Shard,
    SiteStatus,
)
from artimon.status.probes import probe_agent, probe_replica, probe_service
from artimon.status.registry import Registry, ask_member, read_registry
from bookkeeper.zk import resolve_zk
from collector_agent import owner

__all__ = ["collect", "findings"]

FULL_CHANNEL_PCT = 90.0
_THREADS = 32


def collect(zk: str | None = None, *, timeout: float = 1.0) -> SiteStatus:
    """The view of the site whose ZooKeeper is ``zk`` (a connect string with its root, as
    ``$ARTIMON_ZK``; default ``$ARTIMON_ZK``, then ``127.0.0.1:2181``)."""
    started, now_ms = time.monotonic(), int(time.time() * 1000)
    connect, layout = resolve_zk(zk)
    # one client for every probe: a client each would build an SSL context each (CPU, under the GIL)
    with httpx.Client() as http, ThreadPoolExecutor(_THREADS, thread_name_prefix="status-probe") as pool:
        asked = [pool.submit(ask_member, address.strip(), timeout) for address in connect.split(",")]
        registry = read_registry(connect, layout, timeout)
        read = registry if isinstance(registry, Registry) else Registry()
        agent_services = read.services.get("agent", {}).values()
        agents = [pool.submit(probe_agent, http, info, timeout, now_ms) for info in agent_services]
        replicas = {
            shard: [
                pool.submit(probe_replica, http, name, payload, timeout) for name, payload in members.items()
            ]
            for shard, members in read.shards.items()
        }
        services = [
            pool.submit(probe_service, http, info, timeout)
            for kind, named in sorted(read.services.items())
            if kind != "agent"
            for info in named.values()
        ]
        members = [f.result() for f in asked]
    status = SiteStatus(
        taken_at=now_ms,
        took_s=0.0,
        zk=f"{connect}{layout.root}",
        zookeeper=members,
        leader=next((m.address for m in members if m.mode in ("leader", "standalone")), None),
        registry="" if isinstance(registry, Registry) else registry,
        agents=[f.result() for f in agents],
        shards=[_shard(name, futures) for name, futures in sorted(replicas.items())],
        services=[f.result() for f in services],
    )
    _groups(status, read)
    status.missing, unreadable = missing_components(read)
    status.degraded = findings(status, read) + unreadable
    status.took_s = round(time.monotonic() - started, 3)
    return status


def _shard(name: str, futures: list[Future[Replica]]) -> Shard:
    replicas = sorted((f.result() for f in futures), key=lambda r: r.address)
    answered = {(r.series, r.head_ms) for r in replicas if r.up}
    return Shard(name, replicas, agree=len(answered) <= 1)


def _groups(status: SiteStatus, registry: Registry) -> None:
    """Agent groups and who owns which endpoint: the live members' rendezvous hashing, as the
    agents compute it for the next round (an agent's ``contexts`` or ``labels.*`` filters
    are its own: the view assumes none)."""
    for group, members in sorted(registry.groups.items()):
        alive = sorted(members)
        owners = {key: owner(key, alive) for key in registry.endpoints}
        counts = Counter(owners.values())
        status.groups.append(
            AgentGroup(
                group,
                [
                    GroupMember(agent_id, info.host, info.started, info.source, counts[agent_id])
                    for agent_id, (info, _) in sorted(members.items())
                ],
                endpoints=len(registry.endpoints),
                unowned=counts[None],
                owners={key: agent for key, agent in owners.items() if agent is not None},
            )
        )


def _agent_findings(agent: AgentProcess) -> list[Finding]:
    where = f"agent {agent.name}"
    if not agent.up:
        return [Finding(where, f"down: its monitoring at {agent.url} does not answer: {agent.error}")]
    found = []
    if agent.lag_s and agent.interval_s and agent.lag_s > agent.interval_s:
        found.append(Finding(where, f"late: its next round is {agent.lag_s:.1f} s overdue"))
    if agent.fullest_channel_pct >= FULL_CHANNEL_PCT:
        full = f"{agent.fullest_channel_pct:.0f} % full ({agent.backlog} events waiting)"
        found.append(Finding(where, f"a channel is {full}"))
    return found


def _shard_findings(shard: Shard) -> list[Finding]:
    where = f"vhms shard {shard.shard}"
    if not shard.replicas:
        return [Finding(where, "down: no replica registered")]
    found = [Finding(f"{where} replica {r.address}", f"down: {r.error}") for r in shard.replicas if not r.up]
    if not shard.agree:
        held = ", ".join(f"{r.address} {r.series} series to {r.head_ms}" for r in shard.replicas if r.up)
        found.append(Finding(where, f"replicas disagree: {held}"))
    return found


def _service_findings(service: Service) -> list[Finding]:
    where = f"{service.kind} {service.name}"
    if not service.up:
        return [Finding(where, f"down: {service.error}")]
    if service.expect and service.alive is not None and service.alive < service.expect:
        return [Finding(where, f"{service.alive} of {service.expect} members alive ({service.detail})")]
    return []


def findings(status: SiteStatus, registry: Registry) -> list[Finding]:
    """What is degraded, and why (see the module doc's table; the known records that do not
    parse are :func:`~artimon.status.known.missing_components`' to say)."""
    found = [Finding(f"zookeeper {m.address}", f"down: {m.error}") for m in status.zookeeper if not m.up]
    if status.leader is None and any(m.up for m in status.zookeeper):
        found.append(Finding("zookeeper", "no member leads: the ensemble has no quorum"))
    if status.registry:
        return [*found, Finding("registry", status.registry)]
    for group in status.groups:
        if not group.members and group.endpoints:
            found.append(
                Finding(f"agent group {group.group}", f"no agent alive: {group.endpoints} endpoints unpolled")
            )
    for agent in status.agents:
        found += _agent_findings(agent)
    for shard in status.shards:
        found += _shard_findings(shard)
    for kind, named in sorted(registry.services.items()):
        if not named:
            found.append(Finding(kind, f"none alive: /services/{kind} is empty (its last one left or died)"))
    for service in status.services:
        found += _service_findings(service)
    if registry.refused:
        refused = f"{registry.refused} registrations refused: their payload does not parse"
        found.append(Finding("registry", refused))
    return found + [Finding(m.component, _missing_why(m)) for m in status.missing]


def _missing_why(missing: Missing) -> str:
    registered = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(missing.registered / 1000))
    return (
        f"missing: known, not registered now (killed, cut off, or stopped uncleanly); last registered "
        f"{registered} UTC at {missing.address}; gone for good: artimon status --forget {missing.id}"
    )
