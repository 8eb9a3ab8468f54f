"""The membership recipe against a real ZooKeeper: groups and members with their payloads,
refused payloads left out, the grace of an emptied group, and watches re-armed after the
watcher's session expires."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping

import pytest
from kazoo.client import KazooClient

from bookkeeper.ground import Member, Membership, MembershipState
from bookkeeper.testing import expire_session
from bookkeeper.zk import make_client, resolve_zk


def _decode(group: str, name: str, data: bytes) -> dict[str, object]:
    payload = json.loads(data)
    if not isinstance(payload, dict) or "port" not in payload:
        raise ValueError(f"no port in {data!r}")
    return payload


@pytest.fixture
def clients(zk_hosts: str) -> Iterator[tuple[KazooClient, KazooClient, str]]:
    connect, layout = resolve_zk(zk_hosts)
    watcher, writer = make_client(connect), make_client(connect)
    watcher.start(timeout=20)
    writer.start(timeout=20)
    yield watcher, writer, f"{layout.root}/things"
    for client in (watcher, writer):
        client.stop()
        client.close()


def names(view: Mapping[str, tuple[Member, ...]]) -> dict[str, list[str]]:
    return {group: [m.name for m in members] for group, members in view.items()}


def test_members_payloads_refusals_and_grace(
    clients: tuple[KazooClient, KazooClient, str], wait: Callable[..., None]
) -> None:
    watcher, writer, root = clients
    views: list[dict[str, list[str]]] = []
    membership = Membership(
        watcher, root, decode=_decode, grace=1.0, refresh=30.0, on_change=lambda v: views.append(names(v))
    )
    membership.start()
    try:
        wait(membership.ready.is_set, what="the first read")
        assert membership.view() == {} and membership.state is MembershipState.WATCHING
        writer.create(f"{root}/a%2Fb/m1", json.dumps({"port": 1}).encode(), makepath=True, ephemeral=True)
        writer.create(f"{root}/a%2Fb/m2", b"not json", ephemeral=True)
        writer.create(f"{root}/c/m3", json.dumps({"port": 3}).encode(), makepath=True, ephemeral=True)
        wait(lambda: names(membership.view()) == {"a/b": ["m1"], "c": ["m3"]}, what="two groups")
        (member,) = membership.members("a/b")
        assert member.payload == {"port": 1} and member.created_ms > 0  # m2's payload was refused
        writer.delete(f"{root}/c/m3")
        wait(lambda: names(membership.view()).get("c") == [], what="c kept empty in its grace")
        wait(lambda: "c" not in membership.view(), what="c dropped after its grace")
        assert {"a/b": ["m1"], "c": []} in views  # every change reached on_change, in order
    finally:
        membership.stop()
    assert membership.state is MembershipState.CLOSED


def test_watches_come_back_after_the_session_expires(
    zk_hosts: str, clients: tuple[KazooClient, KazooClient, str], wait: Callable[..., None]
) -> None:
    watcher, writer, root = clients
    membership = Membership(watcher, root, refresh=60.0, groups=lambda g: g != "ignored")
    membership.start()
    try:
        writer.create(f"{root}/g/one", b"", makepath=True, ephemeral=True)
        writer.create(f"{root}/ignored/x", b"", makepath=True, ephemeral=True)
        wait(lambda: names(membership.view()) == {"g": ["one"]}, what="the first member")
        expired = threading.Event()
        watcher.add_listener(lambda state: expired.set() if state == "LOST" else None)
        expire_session(resolve_zk(zk_hosts)[0], watcher)
        assert expired.is_set()
        writer.create(f"{root}/g/two", b"", ephemeral=True)  # seen only through re-armed watches
        wait(lambda: names(membership.view()) == {"g": ["one", "two"]}, what="a member after the expiry")
    finally:
        membership.stop()


def test_read_now_sees_the_leaders_members_while_the_watch_is_held(
    clients: tuple[KazooClient, KazooClient, str], wait: Callable[..., None]
) -> None:
    """An agent deciding a round reads the group as the leader has it, even when its watch
    runs late: here kazoo's event thread, which delivers watches, is held by another watch."""
    watcher, writer, root = clients
    writer.create(f"{root}/g/one", b"", makepath=True, ephemeral=True)
    membership = Membership(watcher, root, refresh=60.0)
    membership.start()
    release = threading.Event()
    try:
        wait(lambda: names(membership.view()) == {"g": ["one"]}, what="the first member")
        watcher.exists(f"{root}/held", watch=lambda _event: release.wait(60))
        writer.create(f"{root}/held", b"")  # its watch holds the event thread; g's queues behind
        writer.create(f"{root}/g/two", b"", ephemeral=True)
        assert names(membership.view()) == {"g": ["one"]}
        assert membership.read_now(timeout=20)
        assert names(membership.view()) == {"g": ["one", "two"]}  # held: no member, no group
    finally:
        release.set()
        membership.stop()
    assert not membership.read_now(timeout=5)  # stopped: nothing is read
