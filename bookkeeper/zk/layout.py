"""The ZooKeeper layout every Artimon process shares, and the endpoint payload.

Under a root (default ``/artimon``; an ``ARTIMON_ZK`` of ``host:port/other`` picks another)::

    /contexts/<context>/<ip>:<port>:<uuid>   ephemeral   JSON EndpointInfo (this module)
    /agents/<group>/<agent-id>               ephemeral   JSON: host, monitoring port, started
    /vhms/<shard>/<ip>:<port>                ephemeral   JSON: shard, host, port
    /config/agents/<agent-name>              persistent  agent properties

Path segments that come from users (context, group, shard, agent names) are percent-encoded
so that a ``/`` in a context name cannot escape its directory.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from urllib.parse import quote, unquote

from bookkeeper.exceptions import MalformedFrameError

__all__ = ["DEFAULT_ROOT", "EndpointInfo", "ZkLayout", "resolve_zk"]

DEFAULT_ROOT = "/artimon"
DEFAULT_ZK = "127.0.0.1:2181"


def resolve_zk(hosts: str | None = None) -> tuple[str, ZkLayout]:
    """``(connect string, layout)`` from ``hosts``, else ``$ARTIMON_ZK``, else ``127.0.0.1:2181``.

    A path after the host list (``h1:2181,h2:2181/artimon-test``) is the layout's root.
    """
    spec = hosts or os.environ.get("ARTIMON_ZK") or DEFAULT_ZK
    connect, slash, root = spec.partition("/")
    if not connect:
        raise ValueError(f"ZooKeeper connect string {spec!r} has no host")
    return connect, ZkLayout("/" + root.strip("/") if slash and root.strip("/") else DEFAULT_ROOT)


def _segment(name: str) -> str:
    return quote(name, safe="")


@dataclass(frozen=True)
class ZkLayout:
    """Paths of the Artimon znodes under ``root``."""

    root: str = DEFAULT_ROOT

    @property
    def contexts(self) -> str:
        return f"{self.root}/contexts"

    def context(self, context: str) -> str:
        return f"{self.contexts}/{_segment(context)}"

    def endpoint(self, context: str, ip: str, port: int, uuid: str) -> str:
        return f"{self.context(context)}/{ip}:{port}:{uuid}"

    def agents(self, group: str) -> str:
        return f"{self.root}/agents/{_segment(group)}"

    def agent(self, group: str, agent_id: str) -> str:
        return f"{self.agents(group)}/{_segment(agent_id)}"

    def vhms_shard(self, shard: str) -> str:
        return f"{self.root}/vhms/{_segment(shard)}"

    def vhms_member(self, shard: str, ip: str, port: int) -> str:
        return f"{self.vhms_shard(shard)}/{ip}:{port}"

    def agent_config(self, agent_name: str) -> str:
        return f"{self.root}/config/agents/{_segment(agent_name)}"

    @staticmethod
    def context_name(segment: str) -> str:
        """The context a ``/contexts/<segment>`` child stands for."""
        return unquote(segment)


@dataclass(frozen=True)
class EndpointInfo:
    """What a bookkeeper endpoint publishes in its znode."""

    host: str
    port: int
    context: str
    uuid: str
    labels: dict[str, str] = field(default_factory=dict)
    protocol_version: int = 1

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> EndpointInfo:
        """Parse a znode payload; ``MalformedFrameError`` if it is not an endpoint's."""
        try:
            raw = json.loads(data)
            info = cls(
                host=str(raw["host"]),
                port=int(raw["port"]),
                context=str(raw["context"]),
                uuid=str(raw["uuid"]),
                labels={str(k): str(v) for k, v in raw.get("labels", {}).items()},
                protocol_version=int(raw.get("protocol_version", 1)),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise MalformedFrameError(f"not an endpoint payload: {exc!r}: {data[:200]!r}") from None
        if not 0 < info.port < 65536:
            raise MalformedFrameError(f"endpoint payload has port {info.port}")
        return info
