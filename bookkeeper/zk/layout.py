"""The ZooKeeper layout every Artimon process shares, and the endpoint payload.

Under a root (default ``/artimon``; an ``ARTIMON_ZK`` of ``host:port/other`` picks another)::

    /contexts/<context>/<ip>:<port>:<uuid>   ephemeral   JSON EndpointInfo (this module)
    /agents/<group>/<agent-id>               ephemeral   JSON AgentInfo (this module)
    /vhms/<shard>/<ip>:<port>                ephemeral   JSON: shard, host, port, http_port
    /config/groups/<group>/current           persistent  JSON: the version agents of the group apply
    /config/groups/<group>/v<N>              persistent  agent properties, version N (10 digits)
    /config/agents/<agent-id>/current, v<N>  persistent  the same for one agent (overrides its group)
    /config/status/<agent-id>                ephemeral   JSON: the version an agent runs or refused
    /services/<kind>/<name>                  ephemeral   JSON: kind, name, url, host, started
                                                         (what ``artimon status`` probes)
    /known/agents|vhms|services/<a>/<b>      persistent  JSON KnownRecord (this module): the
                                                         registration of the same path below
                                                         the root, remembered past its session

Path segments that come from users (context, group, shard, agent names) are percent-encoded
so that a ``/`` in a context name cannot escape its directory.

Payloads are checked when read (``from_znode``): at most ``MAX_PAYLOAD`` bytes of a JSON
object with the fields and types below, a host of host-name characters, at most
``MAX_LABELS`` labels of bounded length, and an endpoint's payload must agree with its
znode (context, ``ip:port:uuid``). Anything else is ``MalformedFrameError`` (a
``ValueError``), and the membership recipe leaves that member out.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from bookkeeper.exceptions import MalformedFrameError

__all__ = [
    "DEFAULT_ROOT",
    "MAX_LABELS",
    "MAX_PAYLOAD",
    "AgentInfo",
    "EndpointInfo",
    "KnownRecord",
    "ZkLayout",
    "json_object",
    "resolve_zk",
]

DEFAULT_ROOT = "/artimon"
DEFAULT_ZK = "127.0.0.1:2181"
MAX_PAYLOAD = 64 * 1024
MAX_LABELS = 64
_MAX_LABEL_KEY = 128
_MAX_LABEL_VALUE = 1024
_HOST_RE = re.compile(r"[A-Za-z0-9._:-]{1,253}")
_UUID_RE = re.compile(r"[A-Za-z0-9-]{1,64}")


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

    @property
    def config(self) -> str:
        return f"{self.root}/config"

    @property
    def agent_configs(self) -> str:
        return f"{self.config}/agents"

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

    @property
    def group_configs(self) -> str:
        return f"{self.config}/groups"

    @property
    def config_statuses(self) -> str:
        return f"{self.config}/status"

    def agent_config(self, agent_id: str) -> str:
        return f"{self.agent_configs}/{_segment(agent_id)}"

    def group_config(self, group: str) -> str:
        return f"{self.group_configs}/{_segment(group)}"

    def config_status(self, agent_id: str) -> str:
        return f"{self.config_statuses}/{_segment(agent_id)}"

    @property
    def services(self) -> str:
        return f"{self.root}/services"

    def service(self, kind: str, name: str) -> str:
        return f"{self.services}/{_segment(kind)}/{_segment(name)}"

    @property
    def known(self) -> str:
        return f"{self.root}/known"

    def known_record(self, path: str) -> str:
        """Where the registration at ``path`` (under the root) is remembered: the same path
        below ``/known`` (see :class:`KnownRecord`)."""
        if not path.startswith(f"{self.root}/"):
            raise ValueError(f"registration path {path!r} is not under the root {self.root!r}")
        return f"{self.known}{path[len(self.root) :]}"

    @staticmethod
    def context_name(segment: str) -> str:
        """The context a ``/contexts/<segment>`` child stands for."""
        return unquote(segment)


def json_object(data: bytes, what: str, limit: int, error: type[Exception]) -> dict[str, Any]:
    """``data`` as a JSON object of at most ``limit`` bytes; ``error`` naming ``what`` when
    it is larger, not JSON, or not an object (a znode's payload or record, read as untrusted)."""
    if len(data) > limit:
        raise error(f"{what} of {len(data)} bytes exceeds {limit}")
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeError):
        raise error(f"{what} is not JSON: {data[:200]!r}") from None
    if not isinstance(raw, dict):
        raise error(f"{what} is not a JSON object: {data[:200]!r}")
    return raw


def _text(raw: dict[str, Any], key: str, what: str, pattern: re.Pattern[str] | None = None) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
        raise MalformedFrameError(f"{what} payload has {key} {value!r}")
    return value


def _integer(
    raw: dict[str, Any], key: str, what: str, low: int, high: int, default: int | None = None
) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MalformedFrameError(f"{what} payload has {key} {value!r} (an integer from {low} to {high})")
    return value


@dataclass(frozen=True)
class EndpointInfo:
    """What a bookkeeper endpoint publishes in its znode."""

    host: str
    port: int
    context: str
    uuid: str
    labels: dict[str, str] = field(default_factory=dict)
    protocol_version: int = 1

    @property
    def znode_name(self) -> str:
        return f"{self.host}:{self.port}:{self.uuid}"

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> EndpointInfo:
        """Parse a znode payload; ``MalformedFrameError`` if it is not an endpoint's."""
        what = "endpoint"
        raw = json_object(data, f"{what} payload", MAX_PAYLOAD, MalformedFrameError)
        labels = raw.get("labels", {})
        if not isinstance(labels, dict) or len(labels) > MAX_LABELS:
            raise MalformedFrameError(
                f"endpoint payload has labels {str(labels)[:200]} (at most {MAX_LABELS})"
            )
        for key, value in labels.items():
            if not (isinstance(value, str) and len(key) <= _MAX_LABEL_KEY and len(value) <= _MAX_LABEL_VALUE):
                raise MalformedFrameError(f"endpoint payload has label {key[:200]!r}={str(value)[:200]!r}")
        return cls(
            host=_text(raw, "host", what, _HOST_RE),
            port=_integer(raw, "port", what, 1, 65535),
            context=_text(raw, "context", what),
            uuid=_text(raw, "uuid", what, _UUID_RE),
            labels=dict(labels),
            protocol_version=_integer(raw, "protocol_version", what, 1, 2**31 - 1, default=1),
        )

    @classmethod
    def from_znode(cls, context: str, name: str, data: bytes) -> EndpointInfo:
        """Parse the payload of ``/contexts/<context>/<name>``; it must agree with its znode
        (the decoded context, ``ip:port:uuid``), or an endpoint could send its pollers to
        another address than the one its znode names."""
        info = cls.from_json(data)
        if info.context != context or info.znode_name != name:
            raise MalformedFrameError(
                f"endpoint payload ({info.context!r}, {info.znode_name!r}) disagrees with its znode "
                f"({context!r}, {name!r})"
            )
        return info


@dataclass(frozen=True)
class AgentInfo:
    """What an agent publishes in its group's znode ``/agents/<group>/<agent-id>``: its
    host, when it started (epoch ms) and the source that registered it."""

    host: str
    started: int
    source: str

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> AgentInfo:
        """Parse a znode payload; ``MalformedFrameError`` if it is not an agent's."""
        what = "agent"
        raw = json_object(data, f"{what} payload", MAX_PAYLOAD, MalformedFrameError)
        source = _text(raw, "source", what)
        if len(source) > 256:
            raise MalformedFrameError(f"agent payload has a source name of {len(source)} characters")
        return cls(_text(raw, "host", what, _HOST_RE), _integer(raw, "started", what, 0, 2**63 - 1), source)

    @classmethod
    def from_znode(cls, group: str, name: str, data: bytes) -> AgentInfo:
        """Parse the payload of ``/agents/<group>/<name>`` (the membership recipe's decode)."""
        return cls.from_json(data)


@dataclass(frozen=True)
class KnownRecord:
    """What a component leaves in ``/known/...`` beside its ephemeral registration, so that
    ``artimon status`` can name it missing once the ephemeral is gone (Consul's and Nomad's
    "failed" or "down" member, not a forgotten one): when it last registered (epoch ms) and
    the registration's payload (its last known address). Written each time the registration
    is made (once per start, again after a session expiry), deleted by a clean stop
    (:meth:`bookkeeper.zk.Registration.close`) or ``artimon status --forget``."""

    registered: int
    payload: str

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> KnownRecord:
        """Parse a record; ``MalformedFrameError`` naming what is wrong."""
        what = "known record"
        raw = json_object(data, what, 2 * MAX_PAYLOAD, MalformedFrameError)
        payload = raw.get("payload")
        if not isinstance(payload, str) or len(payload) > MAX_PAYLOAD:
            raise MalformedFrameError(f"known record has payload {str(payload)[:200]!r}")
        return cls(_integer(raw, "registered", what, 0, 2**63 - 1), payload)
