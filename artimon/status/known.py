"""Known but not live: what ``artimon status`` says of a component that registered once and
is not registered now, and how an operator forgets one that is gone for good.

Each component that registers ephemerally (an ``artimon`` source's group membership, a VHMS
member, a service: an agent's monitoring, a query API, the Kafka, HDFS or Spark a launcher
started) also leaves a persistent record beside it, ``/known/<category>/<a>/<b>``
(:class:`bookkeeper.zk.KnownRecord`), written when it registers and deleted by its clean
stop. A record without its registration is a component killed, cut off, or stopped while
ZooKeeper was out of its reach: *missing* (Consul's "failed", Nomad's "down"), named with its
last known address until it comes back or ``artimon status --forget <id>`` forgets it. A
record that does not parse is named as such, never a crash.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from artimon.status.model import CATEGORIES, Finding, Missing, ServiceInfo, component_id, split_component_id
from artimon.status.registry import Registry, read_registry
from bookkeeper.zk import MAX_PAYLOAD, AgentInfo, KnownRecord, ZkLayout, json_object, make_client, resolve_zk

__all__ = ["forget", "forget_everything", "missing_components"]

_NAMED_AT_MOST = 5  # unreadable records named one by one; past that, counted


def _component(category: str, parent: str, name: str) -> str:
    """The component as the view's findings name it (a service ``<kind> <name>``)."""
    return {
        "agents": f"agent group {parent} member {name}",
        "vhms": f"vhms shard {parent} replica {name}",
    }.get(category, f"{parent} {name}")


def _address(category: str, name: str, payload: bytes) -> str:
    """The last known address in a registration's payload; ``ValueError`` if it does not parse."""
    if category == "agents":
        return AgentInfo.from_json(payload).host
    if category == "services":
        return ServiceInfo.from_json(payload).url
    raw = json_object(payload, "vhms payload", MAX_PAYLOAD, ValueError)
    http_port = raw.get("http_port")
    return f"{name} (http://{raw.get('host')}:{http_port})" if isinstance(http_port, int) else name


def missing_components(registry: Registry) -> tuple[list[Missing], list[Finding]]:
    """The known components not registered now, and a finding per known record that does
    not parse (the first few named, the rest counted)."""
    missing: list[Missing] = []
    unreadable: list[str] = []
    for ident, data in sorted(registry.known.items()):
        category, parent, name = split_component_id(ident)
        try:
            record = KnownRecord.from_json(data)
            address = _address(category, name, record.payload.encode())
        except ValueError as exc:
            unreadable.append(f"known record {ident} does not parse: {exc}")
            continue
        if ident not in registry.live:
            missing.append(Missing(ident, _component(category, parent, name), address, record.registered))
    found = [Finding("registry", why) for why in unreadable[:_NAMED_AT_MOST]]
    if len(unreadable) > _NAMED_AT_MOST:
        more = len(unreadable) - _NAMED_AT_MOST
        found.append(Finding("registry", f"{more} more known records do not parse"))
    return missing, found


def _path(layout: ZkLayout, ident: str) -> tuple[str, str]:
    """(the registration's path, its known record's path) of an id."""
    category, parent, name = split_component_id(ident)
    path = {
        "agents": layout.agent(parent, name),
        "vhms": f"{layout.vhms_shard(parent)}/{name}",  # ip:port, as VhmsService names it
        "services": layout.service(parent, name),
    }[category]
    return path, layout.known_record(path)


def forget(
    zk: str | None, ids: Sequence[str], *, missing: bool = False, timeout: float = 10.0
) -> list[tuple[bool, str]]:
    """Forget the known components ``ids`` (and with ``missing``, every one missing now) in
    ``zk`` (default ``$ARTIMON_ZK``), with the process's credentials: per id, whether it was
    forgotten and a line saying so or why not (one registered now is not: stop it first).
    ``ValueError`` for an id that is not one, ``RuntimeError`` when ZooKeeper does not answer."""
    connect, layout = resolve_zk(zk)
    wanted = list(dict.fromkeys(ids))
    for ident in wanted:
        split_component_id(ident)
    if missing:
        registry = read_registry(connect, layout, timeout)
        if isinstance(registry, str):
            raise RuntimeError(registry)
        wanted += [m.id for m in missing_components(registry)[0] if m.id not in wanted]
    paths = {ident: _path(layout, ident) for ident in wanted}
    with _session(connect, timeout) as client:
        return [_forget_one(client, ident, *paths[ident]) for ident in wanted]


def _forget_one(client: KazooClient, ident: str, path: str, known: str) -> tuple[bool, str]:
    if client.exists(path):
        return False, f"{ident}: registered now, not forgotten (its clean stop forgets it)"
    try:
        client.delete(known)
    except NoNodeError:
        return False, f"{ident}: not known"
    except NoAuthError:
        return False, f"{ident}: ZooKeeper refuses to delete {known} with these credentials"
    return True, f"forgot {ident}"


def forget_everything(zk: str | None, timeout: float = 10.0) -> list[str]:
    """Forget every known component; the ids forgotten. ``artimon up`` does it at start on a
    ZooKeeper of its own: what its last run left known (killed with it) comes back as itself
    or not at all, on ports of this run. ``RuntimeError`` when ZooKeeper does not answer."""
    connect, layout = resolve_zk(zk)
    with _session(connect, timeout) as client:
        forgotten = []
        for category in CATEGORIES:
            base = f"{layout.known}/{category}"
            for parent in _children(client, base):
                names = _children(client, f"{base}/{parent}")
                forgotten += [
                    component_id(category, ZkLayout.context_name(parent), ZkLayout.context_name(n))
                    for n in names
                ]
        with contextlib.suppress(NoNodeError):
            client.delete(layout.known, recursive=True)
        return forgotten


@contextlib.contextmanager
def _session(connect: str, timeout: float) -> Iterator[KazooClient]:
    """A session with the process's credentials; ``RuntimeError`` when ZooKeeper does not
    answer or fails a request."""
    client = make_client(connect, timeout)
    try:
        client.start(timeout=timeout)
    except KazooTimeoutError:
        client.close()
        raise RuntimeError(f"no ZooKeeper member of {connect} took a session within {timeout:g} s") from None
    try:
        yield client
    except KazooException as exc:
        raise RuntimeError(f"ZooKeeper {connect}: {type(exc).__name__} {exc}") from None
    finally:
        client.stop()
        client.close()


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        return []
