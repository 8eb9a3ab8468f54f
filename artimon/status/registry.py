"""What ``artimon status`` reads from ZooKeeper: each member's own answer to ``srvr`` (its
mode, so the leader; a member that does not answer within the timeout is down), and the
Artimon tree under the root (agent groups, endpoints, VHMS replicas, services, and what is
known of them under ``/known``), read with kazoo's asynchronous calls, a level at a time, so
a tree of thousands of znodes costs a few round trips, not one per znode.

Discovery is open to readers (:mod:`bookkeeper.zk.acl`): no credentials are needed, and
none are sent. A payload that does not parse is left out and counted in ``refused``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from artimon.servers import four_letter_word
from artimon.status.model import CATEGORIES, ServiceInfo, ZkMember, component_id
from bookkeeper.zk import AgentInfo, ZkLayout

__all__ = ["Registry", "ask_member", "read_registry"]

_SRVR_MAX_BYTES = 64 * 1024
_QUIET = logging.getLogger("artimon.status.zookeeper")  # a dead member is the view's news, not a warning
_QUIET.setLevel(logging.CRITICAL)


def ask_member(address: str, timeout: float) -> ZkMember:
    """``address`` (``host:port``) asked ``srvr``: up with its mode, or down with why."""
    host, _, port = address.rpartition(":")
    asked = time.monotonic()
    answer = four_letter_word(host, int(port), "srvr", timeout=timeout, max_bytes=_SRVR_MAX_BYTES)
    if not answer:  # at once: refused (nothing listens); after the timeout: unreachable or hung
        late = time.monotonic() - asked >= timeout * 0.9
        why = f"no answer to srvr within {timeout:g} s" if late else "connection refused: not running"
        return ZkMember(address, False, error=why)
    if "not in the whitelist" in answer:
        return ZkMember(address, True, error="srvr is not in its 4lw.commands.whitelist: mode unknown")
    if "not currently serving" in answer:
        return ZkMember(address, False, error="not serving requests: it has no quorum")
    fields = dict(line.partition(": ")[::2] for line in answer.splitlines() if ": " in line)
    count = fields.get("Node count", "")
    return ZkMember(address, True, fields.get("Mode", "").strip(), int(count) if count.isdigit() else None)


@dataclass
class Registry:
    """The tree under the root: ``groups`` group -> agent id -> (its payload, its znode's
    creation time in ms); ``endpoints`` the keys the agents own endpoints by
    (``<context segment>/<ip:port:uuid>``); ``shards`` shard -> replica name -> payload;
    ``services`` kind -> name -> payload; ``refused`` payloads that did not parse; ``live``
    the id (:func:`~artimon.status.model.component_id`) of each of these registered now,
    parsed or not; ``known`` the records under ``/known``, by id."""

    groups: dict[str, dict[str, tuple[AgentInfo, int]]] = field(default_factory=dict)
    endpoints: list[str] = field(default_factory=list)
    shards: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    services: dict[str, dict[str, ServiceInfo]] = field(default_factory=dict)
    refused: int = 0
    live: set[str] = field(default_factory=set)
    known: dict[str, bytes] = field(default_factory=dict)


class _Reader:
    """Asynchronous reads of one level of the tree, each waited for at most ``timeout``."""

    def __init__(self, client: KazooClient, timeout: float) -> None:
        self.client, self.timeout = client, timeout

    def children(self, paths: Iterable[str]) -> dict[str, list[str]]:
        pending = {path: self.client.get_children_async(path) for path in paths}
        found: dict[str, list[str]] = {}
        for path, result in pending.items():
            try:
                found[path] = sorted(result.get(timeout=self.timeout))
            except NoNodeError:  # gone meanwhile, or never made: nothing under it
                found[path] = []
        return found

    def data(self, paths: Iterable[str]) -> dict[str, tuple[bytes, int]]:
        pending = {path: self.client.get_async(path) for path in paths}
        found: dict[str, tuple[bytes, int]] = {}
        for path, result in pending.items():
            try:
                data, stat = result.get(timeout=self.timeout)
            except NoNodeError:  # an ephemeral gone between the listing and the read
                continue
            found[path] = (data or b"", stat.ctime)
        return found

    def tree(self, parent: str) -> dict[str, dict[str, tuple[bytes, int]]]:
        """``parent``'s children -> their children -> (payload, creation ms)."""
        groups = self.children([parent])[parent]
        members = self.children(f"{parent}/{g}" for g in groups)
        data = self.data(f"{parent}/{g}/{m}" for g in groups for m in members[f"{parent}/{g}"])
        return {
            ZkLayout.context_name(g): {
                ZkLayout.context_name(m): data[f"{parent}/{g}/{m}"]
                for m in members[f"{parent}/{g}"]
                if f"{parent}/{g}/{m}" in data
            }
            for g in groups
        }


def read_registry(connect: str, layout: ZkLayout, timeout: float) -> Registry | str:
    """The tree (see :class:`Registry`), or why it could not be read."""
    # the session timeout asked is what a silent member costs (a connect, then a request of
    # timeout / members); the server raises it to its minimum, which a short read can live with
    client = KazooClient(hosts=connect, timeout=timeout, logger=_QUIET)
    try:
        client.start(timeout=2 * timeout)  # one silent member, then another that answers
    except KazooTimeoutError:
        client.stop()
        client.close()
        return f"no ZooKeeper member of {connect} took a session within {2 * timeout:g} s"
    try:
        return _read(_Reader(client, timeout), layout)
    except (KazooException, KazooTimeoutError) as exc:
        return f"ZooKeeper {connect} stopped answering: {type(exc).__name__} {exc}"
    finally:
        client.stop()
        client.close()


def _read(reader: _Reader, layout: ZkLayout) -> Registry:
    registry = Registry()
    for category in CATEGORIES:
        for parent, named in reader.tree(f"{layout.known}/{category}").items():
            registry.known.update({component_id(category, parent, n): data for n, (data, _) in named.items()})
    for group, members in reader.tree(f"{layout.root}/agents").items():
        registry.live.update(component_id("agents", group, agent_id) for agent_id in members)
        registry.groups[group] = {}
        for agent_id, (data, created) in members.items():
            try:
                registry.groups[group][agent_id] = (AgentInfo.from_json(data), created)
            except ValueError:
                registry.refused += 1
    contexts = reader.children([layout.contexts])[layout.contexts]
    listed = reader.children(f"{layout.contexts}/{c}" for c in contexts)
    registry.endpoints = [f"{c}/{name}" for c in contexts for name in listed[f"{layout.contexts}/{c}"]]
    for shard, replicas in reader.tree(f"{layout.root}/vhms").items():
        registry.shards[shard] = {}
        registry.live.update(component_id("vhms", shard, name) for name in replicas)
        for name, (data, _) in replicas.items():
            try:
                payload = json.loads(data)
            except ValueError:
                payload = None
            if isinstance(payload, dict):
                registry.shards[shard][name] = payload
            else:
                registry.refused += 1
    for kind, services in reader.tree(layout.services).items():
        registry.services[kind] = {}
        registry.live.update(component_id("services", kind, name) for name in services)
        for name, (data, _) in services.items():
            try:
                registry.services[kind][name] = ServiceInfo.from_json(data)
            except ValueError:
                registry.refused += 1
    return registry
