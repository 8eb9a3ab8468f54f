"""What ``artimon status`` says, as data: the view (:class:`SiteStatus` and its parts, whose
``to_json()`` is ``artimon status --json``'s schema, drawn in docs/operations.md) and the
payload of a service's registration (:class:`ServiceInfo`, ``/services/<kind>/<name>``).

A part is *up* when it answered its probe within the timeout; ``error`` says why not. What
is degraded, and why, is the list :attr:`SiteStatus.degraded`, one :class:`Finding` per
fault, each naming its component: a site is healthy when that list is empty.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from bookkeeper.zk import MAX_PAYLOAD, json_object

__all__ = [
    "AgentGroup",
    "AgentProcess",
    "Finding",
    "GroupMember",
    "Missing",
    "Replica",
    "Service",
    "ServiceInfo",
    "Shard",
    "SiteStatus",
    "ZkMember",
]

_NAME_RE = re.compile(r"[A-Za-z0-9._:/@+-]{1,256}")
KINDS = ("agent", "api", "kafka", "spark", "hdfs")
CATEGORIES = ("agents", "vhms", "services")
"""What registers ephemerally and is remembered under ``/known`` (an agent's group
membership, a VHMS member, a service); a component's id is ``<category>/<a>/<b>``."""


def component_id(category: str, parent: str, name: str) -> str:
    """The id ``artimon status`` shows and ``--forget`` takes: ``agents/<group>/<agent-id>``,
    ``vhms/<shard>/<ip:port>``, ``services/<kind>/<name>`` (a ``/`` or ``%`` of the middle
    name percent-encoded, so that the id splits back)."""
    return f"{category}/{parent.replace('%', '%25').replace('/', '%2F')}/{name}"


def split_component_id(component: str) -> tuple[str, str, str]:
    """``(category, parent, name)`` of an id; ``ValueError`` naming what is wrong."""
    category, _, rest = component.partition("/")
    parent, _, name = rest.partition("/")
    if category not in CATEGORIES or not parent or not name or len(component) > 1024:
        raise ValueError(
            f"{component[:200]!r} is not a component id (agents/<group>/<agent-id>, "
            "vhms/<shard>/<ip:port> or services/<kind>/<name>)"
        )
    return category, parent.replace("%2F", "/").replace("%25", "%"), name


"""The kinds of service a process registers (VHMS shards and agent groups have their own
znodes); a registration of another kind is refused."""


@dataclass(frozen=True)
class ServiceInfo:
    """What a process publishes in ``/services/<kind>/<name>``: its kind (one of
    :data:`KINDS`), a name unique within the kind (``host:port`` of what it serves), the URL
    ``artimon status`` probes (``http://...`` for a ``/health`` or a ``/json`` to read,
    ``kafka://host:port,...`` for brokers), its host, when it started (epoch ms), and for an
    agent the ``group/agent-id`` of each agent-group membership it holds; ``expect`` is how
    many of its members should be alive (Kafka brokers, Spark workers, DataNodes)."""

    kind: str
    name: str
    url: str
    host: str
    started: int
    members: list[str] = field(default_factory=list)
    expect: int = 0

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ServiceInfo:
        """Parse a payload; ``ValueError`` naming what is wrong."""
        raw = json_object(data, "service payload", MAX_PAYLOAD, ValueError)
        kind, name, url, host = (raw.get(k) for k in ("kind", "name", "url", "host"))
        if kind not in KINDS:
            raise ValueError(f"service payload has kind {kind!r} (one of {', '.join(KINDS)})")
        for key, value in (("name", name), ("host", host)):
            if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
                raise ValueError(f"service payload has {key} {value!r}")
        if not isinstance(url, str) or len(url) > 1024 or not re.match(r"(https?|kafka)://", url):
            raise ValueError(f"service payload has url {str(url)[:200]!r}")
        members, started, expect = raw.get("members", []), raw.get("started", -1), raw.get("expect", 0)
        if not (
            isinstance(members, list) and len(members) <= 256 and all(isinstance(m, str) for m in members)
        ):
            raise ValueError(f"service payload has members {str(members)[:200]}")
        for key, number in (("started", started), ("expect", expect)):
            if isinstance(number, bool) or not isinstance(number, int) or number < 0:
                raise ValueError(f"service payload has {key} {number!r}")
        return cls(str(kind), str(name), url, str(host), int(started), members, int(expect))


@dataclass
class ZkMember:
    """One ZooKeeper server of the connect string, asked ``srvr``."""

    address: str
    up: bool
    mode: str = ""  # leader, follower, standalone; "" when down
    znodes: int | None = None
    error: str = ""


@dataclass
class GroupMember:
    """One ``/agents/<group>/<agent-id>``: alive while its session lives."""

    id: str
    host: str
    started: int
    source: str
    endpoints: int  # how many it owns now (rendezvous hashing over the live members)


@dataclass
class AgentGroup:
    group: str
    members: list[GroupMember]
    endpoints: int
    unowned: int
    owners: dict[str, str] = field(default_factory=dict)  # endpoint (context/ip:port:uuid) -> agent id


@dataclass
class AgentProcess:
    """An agent process (its monitoring server, registered as a service of kind ``agent``):
    ``roles`` ``polling`` (an ``artimon`` source), ``store`` (a ``kafka`` source)."""

    name: str
    url: str
    up: bool
    error: str = ""
    members: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    last_round_ms: int | None = None
    interval_s: float | None = None
    lag_s: float | None = None  # how long its next round is overdue (0: on time)
    backlog: int = 0  # events waiting in its channels
    fullest_channel_pct: float = 0.0


@dataclass
class Replica:
    address: str  # host:port of its Thrift service, its znode's name
    url: str
    up: bool
    error: str = ""
    series: int | None = None
    head_ms: int | None = None  # the newest bucket of its finest ring


@dataclass
class Shard:
    shard: str
    replicas: list[Replica]
    agree: bool  # every replica up holds as many series, up to the same bucket


@dataclass
class Service:
    """A query API, a Kafka cluster, a Spark master, a NameNode: probed at its URL; ``alive``
    of ``expect`` members (brokers, workers, DataNodes) where it has members."""

    kind: str
    name: str
    url: str
    up: bool
    error: str = ""
    alive: int | None = None
    expect: int = 0
    detail: str = ""


@dataclass
class Missing:
    """A known component that is not registered now (killed, cut off, or stopped uncleanly):
    its id (what ``artimon status --forget`` takes), the component as the findings name it,
    its last known address, and when it last registered (epoch ms: it has been missing since
    some time after; ZooKeeper keeps no time of an ephemeral's end)."""

    id: str
    component: str
    address: str
    registered: int


@dataclass
class Finding:
    component: str
    why: str


@dataclass
class SiteStatus:
    """The whole view; ``to_json()`` is ``artimon status --json``."""

    taken_at: int
    took_s: float
    zk: str
    zookeeper: list[ZkMember]
    leader: str | None
    registry: str  # "" when ZooKeeper's tree was read, else why not
    groups: list[AgentGroup] = field(default_factory=list)
    agents: list[AgentProcess] = field(default_factory=list)
    shards: list[Shard] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    degraded: list[Finding] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.degraded

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "healthy": self.healthy}
