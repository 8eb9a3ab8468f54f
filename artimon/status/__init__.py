"""The master view (``artimon status``; seed: Flume master NG): who is alive, who owns what,
how late, and what is degraded and why, read from ZooKeeper and each component's own answer.

| concept | file |
|---|---|
| the view as data, its JSON; a service's registration payload | ``model.py`` |
| ZooKeeper's members (``srvr``) and the Artimon tree | ``registry.py`` |
| one bounded probe per process (agents, replicas, API, Kafka, Spark, HDFS) | ``probes.py`` |
| the whole view at once, what is degraded (the rules' table) | ``collect.py`` |
| known but not live (missing), and forgetting one (``--forget``) | ``known.py`` |
| one screen of text | ``text.py`` |
| the page ``/status`` and ``/api/v1/status`` of the dashboard server | ``page.py`` |
| the light registration of what does not register itself; ``up``'s | ``register.py`` |
"""

from __future__ import annotations

import importlib
import typing

from artimon.status.model import (
    AgentGroup,
    AgentProcess,
    Finding,
    GroupMember,
    Missing,
    Replica,
    Service,
    ServiceInfo,
    Shard,
    SiteStatus,
    ZkMember,
)
from artimon.status.page import add_status_routes, render_html
from artimon.status.register import StackRegistrations, agent_service, launcher_service, register_service
from artimon.status.text import render_text

if typing.TYPE_CHECKING:
    from artimon.status.collect import collect, findings
    from artimon.status.known import forget, forget_everything

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
    "StackRegistrations",
    "ZkMember",
    "add_status_routes",
    "agent_service",
    "collect",
    "findings",
    "forget",
    "forget_everything",
    "launcher_service",
    "register_service",
    "render_html",
    "render_text",
]

# loaded when first used (PEP 562): collecting the view reaches every kind of component (the
# agents' ownership rule, httpx probes), which a query API serving the page needs only when
# the page is asked for
_HOME = {"collect": "collect", "findings": "collect", "forget": "known", "forget_everything": "known"}


def __getattr__(name: str) -> typing.Any:
    if name not in _HOME:
        raise AttributeError(f"module 'artimon.status' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"artimon.status.{_HOME[name]}"), name)
    globals()[name] = value
    return value
