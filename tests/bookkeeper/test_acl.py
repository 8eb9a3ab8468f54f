"""ZooKeeper ACLs: with the platform's credentials nobody else can register, delete or
reconfigure anything; a real ZooKeeper (``skipACL`` off, digest authentication built in)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE

from artimon.servers import ZooKeeperServer
from artimon.stack import agent_properties
from bookkeeper import Bookkeeper, ZkAccessError, ZkAuthError
from bookkeeper.ground import list_endpoints
from bookkeeper.testing import start_app
from bookkeeper.zk import (
    AUTH_ENV,
    AUTH_FILE_ENV,
    Registration,
    RegistrationState,
    ZkAuth,
    ZkLayout,
    make_client,
    resolve_zk,
    resolve_zk_auth,
    secure_path,
)
from collector_agent import Agent, ConfigFollower, ConfigStore, ConfigTarget, Pointer
from vhms import ShardedClient
from vhms.server import Store, VhmsService


def properties(sink: str) -> str:
    """An agent of no events into a sink of type ``sink``."""
    return agent_properties(
        "a1",
        sources={"r1": {"type": "seq", "totalEvents": 0, "channels": "c1"}},
        channels={"c1": {"type": "memory"}},
        sinks={"k1": {"type": sink, "channel": "c1"}},
    )


@pytest.fixture(autouse=True)
def no_credentials_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(AUTH_ENV, raising=False)
    monkeypatch.delenv(AUTH_FILE_ENV, raising=False)


@pytest.fixture
def auth() -> ZkAuth:
    return ZkAuth("artimon", uuid.uuid4().hex)


@pytest.fixture
def layout(zk_hosts: str) -> ZkLayout:
    return resolve_zk(zk_hosts)[1]


def _client(zk_hosts: str, auth: ZkAuth | None = None) -> Iterator[KazooClient]:
    connect, _ = resolve_zk(zk_hosts)
    client = make_client(connect, auth=auth) if auth else KazooClient(hosts=connect)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def anonymous(zk_hosts: str) -> Iterator[KazooClient]:
    yield from _client(zk_hosts)


@pytest.fixture
def admin(zk_hosts: str, auth: ZkAuth) -> Iterator[KazooClient]:
    yield from _client(zk_hosts, auth)


def test_the_test_server_enforces_acls(zk_server: ZooKeeperServer | None) -> None:
    if zk_server is not None:
        assert "skipACL" not in (zk_server.data_dir / "zoo.cfg").read_text()


def test_credentials_come_from_the_argument_the_environment_or_a_file(tmp_path: Path) -> None:
    assert resolve_zk_auth(environ={}) is None
    assert resolve_zk_auth("u:p:with:colons", environ={}) == ZkAuth("u", "p:with:colons")
    assert resolve_zk_auth(environ={AUTH_ENV: "u:p"}) == ZkAuth("u", "p")
    secret = tmp_path / "zk.auth"
    secret.write_text("file-user:file-pass\n")
    assert resolve_zk_auth(environ={AUTH_FILE_ENV: str(secret)}) == ZkAuth("file-user", "file-pass")
    assert "file-pass" not in repr(resolve_zk_auth(environ={AUTH_FILE_ENV: str(secret)}))
    for bad in ("nocolon", ":s3cr3t", "u:", "a user:s3cr3t"):
        with pytest.raises(ZkAuthError, match=AUTH_ENV) as refused:
            resolve_zk_auth(environ={AUTH_ENV: bad})
        assert "s3cr3t" not in str(refused.value)  # a message never shows the password
    with pytest.raises(ZkAuthError, match="cannot be read"):
        resolve_zk_auth(environ={AUTH_FILE_ENV: str(tmp_path / "missing")})


def test_with_credentials_an_anonymous_client_cannot_write_anything(
    zk_hosts: str,
    auth: ZkAuth,
    layout: ZkLayout,
    anonymous: KazooClient,
    admin: KazooClient,
    wait: Callable[..., None],
) -> None:
    vhms = VhmsService(Store(), shard="s1", http_port=None)
    vhms.start(zk_hosts, zk_auth=auth)
    bk = Bookkeeper("web", labels={})
    server = bk.serve(zk_hosts=zk_hosts, zk_auth=auth)
    agent = Agent.from_properties(properties("null"), "a1", {})
    agent.start()
    follower = ConfigFollower(agent, zk_hosts, zk_auth=auth)
    follower.start()
    try:
        assert vhms.registration is not None and server.registration is not None
        assert vhms.registration.registered.wait(30) and server.registration.registered.wait(30)
        wait(lambda: admin.exists(layout.config_status("a1")), what="the follower's report")
        ConfigStore(admin, layout, auth).write(ConfigTarget("agent", "a1"), properties("logger"))
        wait(lambda: agent.reloads == 1, what="the configuration the identity wrote, applied")

        endpoint = server.registration.path
        member = vhms.registration.path
        current = f"{layout.agent_config('a1')}/current"
        assert admin.get_acls(endpoint)[0] == auth.acl()
        assert admin.get_acls(member)[0] == auth.acl()
        known = layout.known_record(member)  # what artimon status names missing once it is gone
        assert admin.get_acls(known)[0] == auth.acl()
        for path in (layout.config, layout.agent_configs, current, layout.config_status("a1")):
            assert admin.get_acls(path)[0] == auth.acl(private=True), path
        attempts: dict[str, Callable[[], object]] = {
            "a fake replica of s1": lambda: anonymous.create(
                layout.vhms_member("s1", "6.6.6.6", 666), b'{"shard": "s1"}', ephemeral=True
            ),
            "a fake shard": lambda: anonymous.create(
                layout.vhms_member("s9", "6.6.6.6", 666), b"{}", ephemeral=True, makepath=True
            ),
            "deleting a shard member": lambda: anonymous.delete(member),
            "forgetting a known shard member": lambda: anonymous.delete(known),
            "rewriting a known shard member": lambda: anonymous.set(known, b"{}"),
            "deleting an endpoint": lambda: anonymous.delete(endpoint),
            "rewriting an endpoint": lambda: anonymous.set(endpoint, b"{}"),
            "re-ACLing an endpoint": lambda: anonymous.set_acls(endpoint, OPEN_ACL_UNSAFE),
            "a fake endpoint": lambda: anonymous.create(
                layout.endpoint("web", "6.6.6.6", 666, "fake"), b"{}", ephemeral=True
            ),
            "a fake agent": lambda: anonymous.create(
                layout.agent("default", "fake"), b"{}", ephemeral=True, makepath=True
            ),
            "a new agent configuration": lambda: anonymous.create(layout.agent_config("a2"), b"x"),
            "a new version": lambda: anonymous.create(f"{layout.agent_config('a1')}/v0000000002", b"x"),
            "moving the current version": lambda: anonymous.set(current, b"x"),
            "deleting the current version": lambda: anonymous.delete(current),
            "reading a configuration": lambda: anonymous.get(f"{layout.agent_config('a1')}/v0000000001"),
            "reading an agent's report": lambda: anonymous.get(layout.config_status("a1")),
            "a fake report": lambda: anonymous.create(layout.config_status("evil"), b"{}", ephemeral=True),
        }
        allowed = []
        for what, attempt in attempts.items():
            try:
                attempt()
            except NoAuthError:
                continue
            allowed.append(what)
        assert allowed == []
        # discovery stays open to anonymous readers
        assert [info.context for info in list_endpoints(anonymous, layout)] == ["web"]
        assert anonymous.get_children(layout.vhms_shard("s1")) == [member.rpartition("/")[2]]
        assert agent.reloads == 1 and follower.refused_unguarded == 0
    finally:
        follower.stop()
        agent.stop()
        bk.close()
        vhms.stop()


def test_znodes_made_before_acls_are_tightened_and_their_leftovers_ignored(
    zk_hosts: str,
    auth: ZkAuth,
    layout: ZkLayout,
    anonymous: KazooClient,
    admin: KazooClient,
    wait: Callable[..., None],
) -> None:
    # what an anonymous client could leave behind while ACLs were off: open persistent znodes,
    # a persistent fake replica of s1, an agent configuration anyone can rewrite
    anonymous.create(layout.vhms_member("s1", "6.6.6.6", 666), b'{"shard": "s1"}', makepath=True)
    open_version = f"{layout.agent_config('a1')}/v0000000001"
    anonymous.create(open_version, properties("logger").encode(), makepath=True)
    anonymous.create(f"{layout.agent_config('a1')}/current", Pointer(1, 0, 0, "anyone").to_json())
    vhms = VhmsService(Store(), shard="s1", http_port=None)
    vhms.start(zk_hosts, zk_auth=auth)
    client = ShardedClient(zk_hosts, zk_auth=auth)
    agent = Agent.from_properties(properties("null"), "a1", {})
    agent.start()
    follower = ConfigFollower(agent, zk_hosts, zk_auth=auth)
    follower.start()
    try:
        assert vhms.registration is not None and vhms.registration.registered.wait(30)
        for path in (layout.root, f"{layout.root}/vhms", layout.vhms_shard("s1")):
            assert admin.get_acls(path)[0] == auth.acl(), path
        with pytest.raises(NoAuthError):
            anonymous.create(layout.vhms_member("s1", "6.6.6.7", 667), b"{}", ephemeral=True)
        # the fake replica is no member: not ephemeral, not the platform's
        wait(lambda: client.shards.get("s1") == [(vhms.host, vhms.port)], what="s1 with its real member only")
        assert client.membership is not None and client.membership.refused == 1
        # the open configuration is not applied, and made private
        wait(lambda: follower.refused_unguarded == 1, what="the open configuration refused")
        assert agent.reloads == 0
        assert admin.get_acls(open_version)[0] == auth.acl(private=True)
        with pytest.raises(NoAuthError):
            anonymous.set(open_version, b"x")
        ConfigStore(admin, layout, auth).write(ConfigTarget("agent", "a1"), properties("logger"))
        wait(lambda: agent.reloads == 1, what="the identity's next push applied")
    finally:
        follower.stop()
        agent.stop()
        client.close()
        vhms.stop()


def test_a_process_without_the_credentials_is_refused_and_says_so(
    zk_hosts: str,
    auth: ZkAuth,
    layout: ZkLayout,
    admin: KazooClient,
    caplog: pytest.LogCaptureFixture,
    wait: Callable[..., None],
) -> None:
    secure_path(admin, f"{layout.root}/vhms", auth.acl())
    connect, _ = resolve_zk(zk_hosts)
    path = layout.vhms_member("s1", "127.0.0.1", 1)
    for credentials, message in [
        (None, f"this process has no credentials: set {AUTH_ENV}"),
        (
            ZkAuth("intruder", "guess"),
            f"refuses to create or secure {layout.root}/vhms/s1 with these credentials",
        ),
    ]:
        registration = Registration(connect, path, b'{"shard": "s1"}', auth=credentials)
        with caplog.at_level(logging.ERROR, logger="bookkeeper.zk.registration"):
            registration.start()
            try:
                wait(lambda registration=registration: registration.refusals >= 1, what="the refusal")
                assert registration.state is RegistrationState.CONNECTING
                assert not registration.registered.is_set()
            finally:
                registration.close()
        assert "ZooKeeper refuses" in caplog.text and message in caplog.text, caplog.text
        caplog.clear()
    with pytest.raises(ZkAccessError, match="refuses to create or secure"):
        other = make_client(connect, auth=ZkAuth("intruder", "guess"))
        other.start(timeout=30)
        try:
            secure_path(other, f"{layout.root}/vhms/s2", auth.acl())
        finally:
            other.stop()
            other.close()
    registration = Registration(connect, path, b'{"shard": "s1"}', auth=auth)
    registration.start()
    try:
        assert registration.registered.wait(30) and registration.refusals == 0
    finally:
        registration.close()


@pytest.mark.slow
def test_with_credentials_the_platform_works_end_to_end(
    zk_hosts: str,
    auth: ZkAuth,
    layout: ZkLayout,
    anonymous: KazooClient,
    admin: KazooClient,
    monkeypatch: pytest.MonkeyPatch,
    wait: Callable[..., None],
) -> None:
    # every process and component takes the credentials from its environment
    monkeypatch.setenv(AUTH_ENV, f"{auth.user}:{auth.password}")
    vhms = VhmsService(Store(), shard="s1", http_port=None)
    vhms.start(zk_hosts)
    app = start_app("shop", zk_hosts, variables=4)
    config = agent_properties(
        "a",
        sources={"poll": {"type": "artimon", "zk": zk_hosts, "interval": 1, "channels": "ch"}},
        channels={"ch": {"type": "memory"}},
        sinks={
            "store": {"type": "vhms", "channel": "ch", "zk": zk_hosts, "timeout": 5, "maxBackoffSleep": 100}
        },
    )
    agent = Agent.from_properties(config, "a", {})
    agent.start()
    try:
        wait(lambda: vhms.store.series >= 4, 30, "the app's variables polled into VHMS")
        assert set(vhms.store.label_values("context")) == {"shop"}
        (info,) = list_endpoints(anonymous, layout)  # discovery without credentials still works
        assert (info.host, info.port) == (app.host, app.port)
        assert admin.get_acls(layout.endpoint("shop", app.host, app.port, app.uuid))[0] == auth.acl()
        agents = admin.get_children(layout.agents("default"))
        assert len(agents) == 1
        assert admin.get_acls(f"{layout.agents('default')}/{agents[0]}")[0] == auth.acl()
        metrics = agent.metrics()
        assert metrics["SOURCE.poll"]["PollFailCount"] == 0
        assert metrics["SINK.store"]["MemberFailCount"] == 0
    finally:
        agent.stop()
        app.kill()
        vhms.stop()
