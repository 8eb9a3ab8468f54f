"""No listener binds every interface unless a flag asks: each command is run as an operator
runs it, and the addresses its process (and its children) listen on are read from /proc.
And ``artimon up``'s defaults shut anonymous clients out of ZooKeeper (issue 28): one ``up``
serves this module's tests of it."""

from __future__ import annotations

import os
import queue
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE
from support import wait_until

from artimon.servers import free_port
from artimon.stack import CREDENTIALS_FILE, agent_properties
from bookkeeper import EndpointInfo, resolve_zk
from bookkeeper.ground import list_endpoints
from bookkeeper.testing import Listener, listening
from bookkeeper.zk import AUTH_ENV, AUTH_FILE_ENV, ZkAuth, ZkLayout, make_client, world_writable

ARTIMON = [sys.executable, "-m", "artimon"]


def properties(bind: str) -> str:
    """An agent whose Flume Thrift source listens on ``bind``, any port."""
    return agent_properties(
        "a1",
        sources={"r1": {"type": "thrift", "bind": bind, "port": 0, "channels": "c1"}},
        channels={"c1": {"type": "memory"}},
        sinks={"k1": {"type": "null", "channel": "c1"}},
    )


class Command:
    """``artimon ARGS`` in a process of its own, its output lines collected by a thread."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [*ARTIMON, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.output.append(line)
            if text in line:
                return line
        stderr = ""
        if self.process.poll() is not None and self.process.stderr is not None:
            stderr = self.process.stderr.read()
        raise AssertionError(f"no line with {text!r} within {timeout} s: {self.output} {stderr}")

    def listeners(self) -> list[Listener]:
        return listening(self.process.pid)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        return self.process.returncode


@contextmanager
def command(*args: str, env: dict[str, str] | None = None) -> Iterator[Command]:
    running = Command(*args, env=env)
    try:
        yield running
    finally:
        running.stop()


def self_reports(zk_hosts: str) -> list[EndpointInfo]:
    connect, layout = resolve_zk(zk_hosts)
    client = make_client(connect)
    client.start(timeout=30)
    try:
        return [info for info in list_endpoints(client, layout) if info.context == "artimon.agent"]
    finally:
        client.stop()
        client.close()


def assert_loopback_only(listeners: list[Listener], expected: int) -> None:
    assert len(listeners) >= expected, listeners
    assert not [entry for entry in listeners if entry.wildcard], listeners
    assert {entry.host for entry in listeners} == {"127.0.0.1"}, listeners


@pytest.mark.slow
def test_agent_with_zk_listens_on_loopback_only_by_default(
    tmp_path: Path, zk_hosts: str, wait: Callable[..., None]
) -> None:
    conf = tmp_path / "agent.properties"
    conf.write_text(properties("127.0.0.1"))
    with command("agent", "-f", str(conf), "-n", "a1", "--monitor-port", "0", "--zk", zk_hosts) as agent:
        agent.wait_for("running")
        wait(lambda: self_reports(zk_hosts), 30, "the self-report endpoint registered")
        (report,) = self_reports(zk_hosts)
        listeners = agent.listeners()
        # the Thrift source, the monitoring server, the self-report endpoint
        assert_loopback_only(listeners, 3)
        assert (report.host, report.port) in {(entry.host, entry.port) for entry in listeners}
        assert report.host == "127.0.0.1"
    assert agent.process.returncode == 0


@pytest.mark.slow
def test_agent_flags_choose_each_address(tmp_path: Path, zk_hosts: str, wait: Callable[..., None]) -> None:
    conf = tmp_path / "agent.properties"
    conf.write_text(properties("127.0.0.4"))
    monitor = free_port()
    args = ["--monitor-host", "127.0.0.3", "--monitor-port", str(monitor), "--report-host", "127.0.0.2"]
    with command("agent", "-f", str(conf), "-n", "a1", "--zk", zk_hosts, *args) as agent:
        agent.wait_for("running")
        wait(lambda: self_reports(zk_hosts), 30, "the self-report endpoint registered")
        (report,) = self_reports(zk_hosts)
        hosts = {entry.port: entry.host for entry in agent.listeners()}
        assert hosts[monitor] == "127.0.0.3"
        assert report.host == "127.0.0.2" and hosts[report.port] == "127.0.0.2"
        assert sorted(hosts.values()) == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


def test_agent_refuses_an_address_it_cannot_bind(tmp_path: Path, zk_hosts: str) -> None:
    conf = tmp_path / "agent.properties"
    conf.write_text(properties("127.0.0.1"))
    result = subprocess.run(
        [*ARTIMON, "agent", "-f", str(conf), "-n", "a1", "--zk", zk_hosts, "--report-host", "192.0.2.1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "artimon agent: cannot listen:" in result.stderr


@pytest.mark.slow
def test_vhms_api_and_zk_commands_listen_on_loopback_by_default(tmp_path: Path) -> None:
    with command("vhms", "--no-register", "--data-dir", str(tmp_path / "vhms")) as vhms:
        vhms.wait_for("serving")
        assert_loopback_only(vhms.listeners(), 2)  # Thrift and HTTP
    with command("api", "--port", "0", "--vhms", "127.0.0.1:9") as api:
        api.wait_for("query API on http://127.0.0.1:")
        assert_loopback_only(api.listeners(), 1)
    env = {k: v for k, v in os.environ.items() if k != "ARTIMON_ZK"}
    port = free_port()
    with command("zk", "--port", str(port), "--data-dir", str(tmp_path / "zk"), env=env) as zk:
        zk.wait_for("ZooKeeper ready")
        listeners = zk.listeners()  # the JVM is a child of the command
        assert port in {entry.port for entry in listeners}
        assert_loopback_only(listeners, 1)
    assert zk.process.returncode == 0


@dataclass
class Up:
    """``artimon up --demo`` with its defaults (ports aside), ready: its ZooKeeper and the
    credentials file its ready line names."""

    command: Command
    data: Path
    zk: str
    auth_file: Path

    @property
    def layout(self) -> ZkLayout:
        return resolve_zk(self.zk)[1]


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    """One ``artimon up --demo`` for this module's tests (its own ZooKeeper, no credentials
    given: the defaults a newcomer gets)."""
    data = tmp_path_factory.mktemp("up")
    env = {k: v for k, v in os.environ.items() if k not in ("ARTIMON_ZK", AUTH_ENV, AUTH_FILE_ENV)}
    args = ["up", "--demo", "--no-spark", "--interval", "1", "--data-dir", str(data)]
    args += ["--zk-port", "0", "--api-port", "0", "--thrift-port", "0"]
    with command(*args, env=env) as running:
        zookeeper = running.wait_for("[ready] zookeeper", timeout=120)
        running.wait_for("[ready] agent", timeout=120)
        named = re.search(f"{AUTH_FILE_ENV}=(\\S+)", zookeeper)
        assert named is not None, zookeeper
        yield Up(running, data, zookeeper.split()[2], Path(named.group(1)))
    assert running.process.returncode == 0


@pytest.mark.slow
def test_up_listens_on_loopback_by_default(up: Up) -> None:
    # ZooKeeper (a child JVM), VHMS Thrift and HTTP, 3 demo apps, the query API, monitoring
    assert_loopback_only(up.command.listeners(), 8)


def _zk(connect: str, auth: ZkAuth | None) -> KazooClient:
    client = make_client(connect, auth=auth) if auth else KazooClient(hosts=connect)
    client.start(timeout=30)
    return client


def _tree(client: KazooClient, path: str) -> Iterator[str]:
    yield path
    for child in client.get_children(path):
        yield from _tree(client, f"{path}/{child}")


@pytest.mark.slow
def test_up_makes_credentials_and_an_anonymous_client_can_write_nothing(up: Up) -> None:
    """Issue 28: the probe's writes, each refused with ``up``'s defaults."""
    assert up.auth_file == up.data / CREDENTIALS_FILE
    assert stat.S_IMODE(up.auth_file.stat().st_mode) == 0o600
    auth = ZkAuth.from_file(up.auth_file)
    layout = up.layout
    admin, anonymous = _zk(up.zk, auth), _zk(up.zk, None)
    try:
        (endpoint,) = [
            f"{layout.context('demo.web')}/{name}" for name in admin.get_children(layout.context("demo.web"))
        ]
        # a znode under /config/agents, where artimon config push --agent writes one agent's versions
        admin.create(
            layout.agent_config("up"), b"a.sources = r1\n", acl=auth.acl(private=True), makepath=True
        )
        attempts: dict[str, Callable[[], object]] = {
            "a fake VHMS shard": lambda: anonymous.create(
                layout.vhms_member("s9", "6.6.6.6", 666), b"{}", ephemeral=True, makepath=True
            ),
            "a fake replica of the shard": lambda: anonymous.create(
                layout.vhms_member("default", "6.6.6.6", 666), b'{"shard": "default"}', ephemeral=True
            ),
            "a fake registration": lambda: anonymous.create(
                layout.endpoint("demo.web", "6.6.6.6", 666, "fake"), b"{}", ephemeral=True
            ),
            "a registration in a new context": lambda: anonymous.create(
                layout.endpoint("evil", "6.6.6.6", 666, "fake"), b"{}", ephemeral=True, makepath=True
            ),
            "deleting a registration": lambda: anonymous.delete(endpoint),
            "rewriting a registration": lambda: anonymous.set(endpoint, b"{}"),
            "re-ACLing a registration": lambda: anonymous.set_acls(endpoint, OPEN_ACL_UNSAFE),
            "a fake agent of the group": lambda: anonymous.create(
                layout.agent("default", "fake"), b"{}", ephemeral=True, makepath=True
            ),
            "rewriting an agent configuration": lambda: anonymous.set(layout.agent_config("up"), b"x"),
            "deleting an agent configuration": lambda: anonymous.delete(layout.agent_config("up")),
            "a new agent configuration": lambda: anonymous.create(layout.agent_config("evil"), b"x"),
            "anything under the root": lambda: anonymous.create(f"{layout.root}/anything", b"x"),
        }
        allowed = []
        for what, attempt in attempts.items():
            try:
                attempt()
            except NoAuthError:
                continue
            allowed.append(what)
        assert allowed == []
        open_nodes = [path for path in _tree(admin, layout.root) if world_writable(admin.get_acls(path)[0])]
        assert open_nodes == []
        assert "6.6.6.6" not in " ".join(_tree(admin, layout.root))
        assert [
            info.context for info in list_endpoints(anonymous, layout) if info.context.startswith("demo.")
        ]
        admin.delete(layout.agent_config("up"))
    finally:
        for client in (admin, anonymous):
            client.stop()
            client.close()


@pytest.mark.slow
def test_up_puts_back_a_deleted_registration_within_a_session_timeout(up: Up) -> None:
    """Deleted by a client holding the rights (an operator, a script with the credentials),
    each ephemeral znode of the stack is back within one ZooKeeper session timeout (10 s)."""
    layout = up.layout
    admin = _zk(up.zk, ZkAuth.from_file(up.auth_file))
    try:
        groups = [layout.context("demo.web"), layout.vhms_shard("default"), layout.agents("default")]
        for group in groups:
            (name,) = admin.get_children(group)
            path = f"{group}/{name}"
            payload = admin.get(path)[0]
            admin.delete(path)
            deleted = time.monotonic()
            wait_until(lambda path=path: admin.exists(path), 10.0, f"{path} back")
            assert time.monotonic() - deleted < 10.0
            assert admin.get(path)[0] == payload
    finally:
        admin.stop()
        admin.close()
