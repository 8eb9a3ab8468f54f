from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from support import wait_until

from artimon.servers import ZooKeeperServer
from bookkeeper import Bookkeeper, EndpointInfo, read_endpoint, resolve_zk
from bookkeeper.ground import list_endpoints
from bookkeeper.testing import AppProcess, expire_session, start_app
from bookkeeper.zk import KnownRecord, Registration
from bookkeeper.zk.registration import RegistrationState


@pytest.fixture
def zk(zk_hosts: str) -> Iterator[KazooClient]:
    connect, _ = resolve_zk(zk_hosts)
    client = KazooClient(hosts=connect)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


def endpoints(zk: KazooClient, zk_hosts: str) -> dict[str, list[EndpointInfo]]:
    found: dict[str, list[EndpointInfo]] = {}
    for info in list_endpoints(zk, resolve_zk(zk_hosts)[1]):
        found.setdefault(info.context, []).append(info)
    return found


@pytest.mark.slow
def test_two_apps_in_two_contexts_register_and_one_killed_disappears(zk: KazooClient, zk_hosts: str) -> None:
    apps: list[AppProcess] = []
    try:
        apps = [
            start_app("web", zk_hosts, variables=5, session_timeout=2.0),
            start_app("db/main", zk_hosts, variables=7, session_timeout=2.0),
        ]
        wait_until(lambda: len(endpoints(zk, zk_hosts)) == 2, 30, "two contexts registered")
        found = endpoints(zk, zk_hosts)
        assert sorted(found) == ["db/main", "web"]
        for app, context in zip(apps, ["web", "db/main"], strict=True):
            (info,) = found[context]
            assert (info.host, info.port, info.uuid) == (app.host, app.port, app.uuid)
            assert info.context == context
            assert info.labels["context"] == context and "host" in info.labels
            assert info.protocol_version == 1
            batch = read_endpoint(info.host, info.port)
            assert batch.context == context
        layout = resolve_zk(zk_hosts)[1]
        assert zk.get_children(layout.context("web")) == [f"{apps[0].host}:{apps[0].port}:{apps[0].uuid}"]

        killed_at = time.monotonic()
        apps[0].kill()
        wait_until(lambda: not endpoints(zk, zk_hosts).get("web"), 15, "the killed app's znode to go")
        # The session timeout was 2 s: the server reaps the node within about that.
        assert time.monotonic() - killed_at < 2.0 + 3.0
        assert len(endpoints(zk, zk_hosts)["db/main"]) == 1
    finally:
        for app in apps:
            app.kill()


@pytest.mark.slow
def test_session_expiry_re_registers(zk: KazooClient, zk_hosts: str) -> None:
    bk = Bookkeeper("expiry", environ={})
    server = bk.serve(zk_hosts=zk_hosts, session_timeout=2.0)
    try:
        registration = server.registration
        assert registration is not None
        assert registration.registered.wait(30)
        connect, _ = resolve_zk(zk_hosts)
        first_session = registration.client.client_id[0]
        expire_session(connect, registration.client)
        wait_until(
            lambda: registration.registrations == 2 and registration.state is RegistrationState.REGISTERED,
            30,
            "re-registration",
        )
        assert registration.client.client_id[0] != first_session
        (info,) = endpoints(zk, zk_hosts)["expiry"]
        assert info.port == server.port
        _, stat = zk.get(registration.path)
        assert stat.ephemeralOwner == registration.client.client_id[0]
    finally:
        bk.close()
    assert not zk.exists(registration.path)


@pytest.mark.slow
def test_a_known_registration_outlives_its_session_in_its_record_and_a_clean_close_forgets_it(
    zk: KazooClient, zk_hosts: str
) -> None:
    """The record under ``/known`` (what ``artimon status`` names missing): written at each
    registration, left by a session that ends without ``close()`` (a kill), deleted by it."""
    connect, layout = resolve_zk(zk_hosts)
    paths = [layout.service("api", f"127.0.0.1:{port}") for port in (1, 2)]
    kept, killed = (
        Registration(connect, path, b'{"a": 1}', session_timeout=2.0, known=layout.known_record(path))
        for path in paths
    )
    for registration in (kept, killed):
        registration.start()
    try:
        assert kept.registered.wait(30) and killed.registered.wait(30)
        first = KnownRecord.from_json(zk.get(kept.known)[0])
        assert first.payload == '{"a": 1}' and first.registered > 0
        expire_session(connect, kept.client)
        wait_until(
            lambda: kept.registrations == 2 and kept.state is RegistrationState.REGISTERED,
            30,
            "re-registration",
        )
        assert KnownRecord.from_json(zk.get(kept.known)[0]).registered >= first.registered
        killed.client.stop()  # its session ends, nothing deleted by the process: a kill
        wait_until(lambda: not zk.exists(killed.path), 30, "the killed one's ephemeral gone")
        assert zk.exists(killed.known), "the record stays: the component is missing, not forgotten"
    finally:
        kept.close()
        killed.close()
    assert not zk.exists(kept.path) and not zk.exists(kept.known)
    assert zk.exists(killed.known), "close() without a session cannot forget: artimon status --forget does"


@pytest.mark.slow
def test_serves_without_zookeeper_and_registers_when_it_comes(tmp_path, caplog) -> None:
    late = ZooKeeperServer(tmp_path / "late-zk", tick_time_ms=500)
    bk = Bookkeeper("late", environ={})
    server = bk.serve(zk_hosts=late.hosts, session_timeout=2.0)
    try:
        assert len(read_endpoint(server.host, server.port)) == 0  # serving already
        registration = server.registration
        assert registration is not None
        wait_until(lambda: "does not answer" in caplog.text, 10, "the warning")
        assert not registration.registered.is_set()
        late.start()
        assert registration.registered.wait(30)
        client = KazooClient(hosts=late.hosts)
        client.start(timeout=30)
        try:
            assert client.exists(registration.path)
        finally:
            client.stop()
            client.close()
    finally:
        bk.close()
        late.stop()
    assert caplog.text.count("does not answer") == 1


@pytest.mark.slow
def test_zookeeper_restart_keeps_the_registration(tmp_path) -> None:
    zk_server = ZooKeeperServer(tmp_path / "restart-zk", tick_time_ms=500)
    zk_server.start()
    bk = Bookkeeper("restart", environ={})
    server = bk.serve(zk_hosts=zk_server.hosts, session_timeout=4.0)
    try:
        registration = server.registration
        assert registration is not None
        assert registration.registered.wait(30)
        zk_server.stop()
        wait_until(lambda: not registration.registered.is_set(), 30, "the loss to be noticed")
        zk_server.start()
        assert registration.registered.wait(60)
        client = KazooClient(hosts=zk_server.hosts)
        client.start(timeout=30)
        try:
            wait_until(lambda: client.exists(registration.path), 30, "the znode back")
        finally:
            client.stop()
            client.close()
    finally:
        bk.close()
        zk_server.stop()


def test_a_deleted_or_rewritten_registration_is_put_back_within_a_session_timeout(
    zk: KazooClient, zk_hosts: str
) -> None:
    session_timeout = 4.0
    bk = Bookkeeper("deleted", environ={})
    server = bk.serve(zk_hosts=zk_hosts, session_timeout=session_timeout)
    try:
        registration = server.registration
        assert registration is not None and registration.registered.wait(30)
        path, payload = registration.path, registration.payload
        for round_ in (1, 2):  # the watch is armed again after each restoration
            zk.delete(path)
            deleted_at = time.monotonic()
            wait_until(lambda: zk.exists(path), session_timeout, f"the znode back (deletion {round_})")
            assert time.monotonic() - deleted_at < session_timeout
            data, stat = zk.get(path)
            assert data == payload and stat.ephemeralOwner == registration.client.client_id[0]
        zk.set(path, b'{"host": "6.6.6.6"}')
        wait_until(lambda: zk.get(path)[0] == payload, session_timeout, "the payload written back")
        assert registration.restored == 3 and registration.registrations == 3
        assert registration.state is RegistrationState.REGISTERED
    finally:
        bk.close()
    assert not zk.exists(path)  # closing deletes it, and nothing puts it back
