"""The view as one screen of text (``artimon status`` without ``--json``): a line per
ZooKeeper member, agent group, agent, shard replica and service, the components known and
not registered now (missing), then what is degraded and why."""

from __future__ import annotations

import time

from artimon.status.model import AgentProcess, Replica, SiteStatus

__all__ = ["render_text"]


def _clock(ms: int | None) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000)) if ms else "-"


def _day(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))


def _state(up: bool) -> str:
    return "up  " if up else "DOWN"


def _agent_line(agent: AgentProcess) -> str:
    if not agent.up:
        return f"  {agent.name:<22} DOWN  {agent.url}  {agent.error}"
    rounds = ""
    if agent.interval_s is not None:
        every = f"every {agent.interval_s:g} s"
        rounds = f", last round {_clock(agent.last_round_ms)} ({every}), lag {agent.lag_s:g} s"
    roles = "+".join(agent.roles) or "-"
    joined = f" ({', '.join(agent.members)})" if agent.members else ""
    return f"  {agent.name:<22} up    {roles}{joined}{rounds}, {agent.backlog} events waiting"


def _replica_line(replica: Replica) -> str:
    if not replica.up:
        return f"    {replica.address:<21} DOWN  {replica.error}"
    held = f"{replica.series:,} series, newest bucket {_clock(replica.head_ms)}"
    return f"    {replica.address:<21} up    {held}"


def render_text(status: SiteStatus) -> str:
    verdict = "healthy" if status.healthy else f"DEGRADED ({len(status.degraded)})"
    taken = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(status.taken_at / 1000))
    lines = [
        f"artimon status of {status.zk} at {taken} UTC ({status.took_s:.2f} s): {verdict}",
        f"zookeeper  leader {status.leader or 'NONE'}",
    ]
    for m in status.zookeeper:
        count = f", {m.znodes} znodes" if m.znodes is not None else ""
        lines.append(f"  {m.address:<22} {_state(m.up)}  {m.mode or m.error}{count}")
    for group in status.groups:
        gone = sum(m.component.startswith(f"agent group {group.group} member ") for m in status.missing)
        lines.append(
            f"agent group {group.group}: {len(group.members)} alive{f', {gone} missing' if gone else ''}, "
            f"{group.endpoints} endpoints, {group.unowned} unowned"
        )
        lines += [
            f"  {a.id:<22} owns {a.endpoints:<5} on {a.host} (source {a.source})" for a in group.members
        ]
    if status.agents:
        lines.append("agents")
        lines += [_agent_line(agent) for agent in status.agents]
    for shard in status.shards:
        up = sum(r.up for r in shard.replicas)
        agree = "NO REPLICA ANSWERS" if not up else "replicas agree" if shard.agree else "REPLICAS DISAGREE"
        lines.append(f"vhms shard {shard.shard}: {up}/{len(shard.replicas)} up, {agree}")
        lines += [_replica_line(replica) for replica in shard.replicas]
    if status.services:
        lines.append("services")
        for s in status.services:
            said = s.detail if s.up else s.error
            lines.append(f"  {s.kind:<6} {s.name:<15} {_state(s.up)}  {said}  {s.url}")
    if status.missing:
        lines.append("missing (known, not registered now; artimon status --forget ID once gone for good)")
        lines += [f"  {m.id:<32} last registered {_day(m.registered)} at {m.address}" for m in status.missing]
    if status.degraded:
        lines.append("degraded")
        lines += [f"  {f.component}: {f.why}" for f in status.degraded]
    return "\n".join(lines) + "\n"
