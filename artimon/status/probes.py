"""The probes of ``artimon status``: one HTTP request (or a Kafka metadata request) per
process, each with a connect and read timeout and a cap on what it reads, turned into a
part of the view (:mod:`artimon.status.model`). A probe never raises: what went wrong is
the part's ``error``.

- an agent: ``GET <monitor>/metrics`` (Flume's JSON): its last round and interval (the
  ``LastRoundTime`` and ``RoundInterval`` of its ``artimon`` sources), the events waiting
  in its channels, its roles (``polling``, ``store``);
- a VHMS replica: ``GET http://<host>:<http_port>/stats``: its series, the newest bucket of
  its finest ring;
- a query API: ``GET <url>/health``;
- Kafka: a metadata request to its bootstrap servers: the brokers alive, the controller;
- a Spark master: ``GET <url>/json/``: its state, its workers ALIVE;
- HDFS: the NameNode's ``GET <url>/jmx?qry=...FSNamesystemState``: DataNodes live and dead.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from artimon.status.model import AgentProcess, Replica, Service, ServiceInfo

__all__ = ["probe_agent", "probe_replica", "probe_service"]

MAX_BYTES = 4 << 20  # an agent's /metrics of many components, a master's /json/ of many workers
_FSNAMESYSTEM = "/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState"


class ProbeError(Exception):
    """Why a probe failed, in a few words."""


def get_json(http: httpx.Client, url: str, timeout: float) -> Any:
    """``url``'s JSON answer, read within ``timeout`` and at most :data:`MAX_BYTES`."""
    try:
        with http.stream("GET", url, timeout=timeout) as response:
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_BYTES:
                    raise ProbeError(f"answer over {MAX_BYTES} bytes")
    except httpx.TimeoutException:
        raise ProbeError(f"no answer within {timeout:g} s") from None
    except httpx.ConnectError as exc:
        raise ProbeError(f"cannot connect: {exc}") from None
    except httpx.HTTPError as exc:
        raise ProbeError(f"{type(exc).__name__}: {exc}") from None
    if response.status_code != 200:
        raise ProbeError(f"HTTP {response.status_code}")
    try:
        return json.loads(body)
    except ValueError:
        raise ProbeError(f"not JSON: {body[:80]!r}") from None


def probe_agent(http: httpx.Client, info: ServiceInfo, timeout: float, now_ms: int) -> AgentProcess:
    agent = AgentProcess(info.name, info.url, False, members=list(info.members))
    try:
        metrics = get_json(http, f"{info.url}/metrics", timeout)
        if not isinstance(metrics, dict):
            raise ProbeError("its /metrics is not a JSON object")
    except ProbeError as exc:
        agent.error = str(exc)
        return agent
    agent.up = True
    rounds: list[tuple[int, int]] = []
    for group, counters in metrics.items():
        if not isinstance(counters, dict):
            continue
        if group.startswith("SOURCE.") and counters.get("RoundInterval"):
            rounds.append((int(counters.get("LastRoundTime", 0)), int(counters["RoundInterval"])))
        if group.startswith("SOURCE.") and "KafkaEmptyCount" in counters and "store" not in agent.roles:
            agent.roles.append("store")
        if group.startswith("CHANNEL."):
            agent.backlog += int(counters.get("ChannelSize", 0))
            agent.fullest_channel_pct = max(
                agent.fullest_channel_pct, float(counters.get("ChannelFillPercentage", 0.0))
            )
    if rounds:
        agent.roles.insert(0, "polling")
        last, interval_ms = max(rounds)
        agent.interval_s = interval_ms / 1000
        agent.last_round_ms = last or None
        due = (last or now_ms) + interval_ms  # no round yet: due one interval after now
        agent.lag_s = round(max(0.0, now_ms - due) / 1000, 3)
    return agent


def probe_replica(http: httpx.Client, name: str, payload: dict[str, Any], timeout: float) -> Replica:
    http_port = payload.get("http_port")
    url = f"http://{payload.get('host')}:{http_port}" if isinstance(http_port, int) else ""
    replica = Replica(name, url, False)
    if not url:
        replica.error = "registered without an HTTP port: nothing to ask"
        return replica
    try:
        stats = get_json(http, f"{url}/stats", timeout)
        replica.series = int(stats["series"])
        heads = [h for h in stats.get("heads_ms", [])[:1] if isinstance(h, int)]
        replica.head_ms = heads[0] if heads else None
    except ProbeError as exc:
        replica.error = str(exc)
        return replica
    except (KeyError, TypeError, ValueError):
        replica.error = "its /stats has no series count"
        return replica
    replica.up = True
    return replica


def _api(http: httpx.Client, service: Service, timeout: float) -> None:
    answer = get_json(http, f"{service.url}/health", timeout)
    if not (isinstance(answer, dict) and answer.get("status") == "ok"):
        raise ProbeError(f"/health says {str(answer)[:80]}")


def _spark(http: httpx.Client, service: Service, timeout: float) -> None:
    answer = get_json(http, f"{service.url}/json/", timeout)
    if not isinstance(answer, dict):
        raise ProbeError("its /json/ is not a JSON object")
    workers = [w for w in answer.get("workers", []) if isinstance(w, dict)]
    service.alive = sum(1 for w in workers if w.get("state") == "ALIVE")
    service.detail = f"master {answer.get('status', '?')}, {service.alive} of {len(workers)} workers ALIVE"
    if answer.get("status") != "ALIVE":
        raise ProbeError(f"the master is {answer.get('status')}")


def _hdfs(http: httpx.Client, service: Service, timeout: float) -> None:
    answer = get_json(http, f"{service.url}{_FSNAMESYSTEM}", timeout)
    beans = answer.get("beans") if isinstance(answer, dict) else None
    if not beans:
        raise ProbeError("the NameNode's JMX has no FSNamesystemState")
    state = beans[0]
    service.alive = int(state.get("NumLiveDataNodes", 0))
    dead = int(state.get("NumDeadDataNodes", 0))
    service.detail = f"NameNode {state.get('FSState', '?')}, DataNodes {service.alive} live, {dead} dead"


def _kafka(http: httpx.Client, service: Service, timeout: float) -> None:
    from confluent_kafka.admin import AdminClient  # only when a site has Kafka

    bootstrap = service.url.removeprefix("kafka://")
    admin = AdminClient(
        {"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000), "log_level": 0}
    )
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception as exc:  # confluent_kafka's KafkaException, its timeout among them
        raise ProbeError(f"no metadata within {timeout:g} s: {exc}") from None
    service.alive = len(metadata.brokers)
    brokers = ", ".join(f"{b.host}:{b.port}" for b in sorted(metadata.brokers.values(), key=lambda b: b.id))
    service.detail = f"brokers {brokers}; controller {metadata.controller_id}"


_PROBES = {"api": _api, "spark": _spark, "hdfs": _hdfs, "kafka": _kafka}


def probe_service(http: httpx.Client, info: ServiceInfo, timeout: float) -> Service:
    """A query API, Kafka, a Spark master or HDFS (see the module doc)."""
    service = Service(info.kind, info.name, info.url, False, expect=info.expect)
    started = time.monotonic()
    try:
        _PROBES[info.kind](http, service, timeout)
    except ProbeError as exc:
        service.error = str(exc)
        return service
    service.up = True
    if not service.detail:
        service.detail = f"answered in {time.monotonic() - started:.2f} s"
    return service
