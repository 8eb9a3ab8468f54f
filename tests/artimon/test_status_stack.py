"""``artimon status`` on real stacks: a healthy ``artimon up --kafka`` (every part alive,
the JSON's schema asserted, the page in headless Chromium), the test stack with its VHMS
and then its agent killed -9 (each named down while it lasts, with why), a ZooKeeper
ensemble of 3 on 127.0.0.1 whose leader is killed (shown down, the new leader named), and
HDFS and a Spark master counting their DataNode and worker (each killed, named).

Waits poll the view with deadlines (a loaded machine takes its time), never sleep."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import NoneType
from typing import Any

import pytest
from playwright.sync_api import expect, sync_playwright
from support import Lines, wait_until

from artimon.servers import HdfsServer, SparkCluster, ZooKeeperEnsemble
from artimon.status import SiteStatus, collect, launcher_service, register_service
from artimon.testing import Stack

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LOADED = 180.0  # seconds: generous deadlines for a machine at load 10+

MEMBER = {"address": str, "up": bool, "mode": str, "znodes": (int, NoneType), "error": str}
GROUP = {
    "group": str,
    "members": [{"id": str, "host": str, "started": int, "source": str, "endpoints": int}],
    "endpoints": int,
    "unowned": int,
    "owners": {str: str},
}
AGENT = {
    "name": str,
    "url": str,
    "up": bool,
    "error": str,
    "members": [str],
    "roles": [str],
    "last_round_ms": (int, NoneType),
    "interval_s": (float, NoneType),
    "lag_s": (float, int, NoneType),
    "backlog": int,
    "fullest_channel_pct": (float, int),
}
REPLICA = {
    "address": str,
    "url": str,
    "up": bool,
    "error": str,
    "series": (int, NoneType),
    "head_ms": (int, NoneType),
}
SERVICE = {
    "kind": str,
    "name": str,
    "url": str,
    "up": bool,
    "error": str,
    "alive": (int, NoneType),
    "expect": int,
    "detail": str,
}
SCHEMA = {
    "taken_at": int,
    "took_s": (float, int),
    "zk": str,
    "zookeeper": [MEMBER],
    "leader": (str, NoneType),
    "registry": str,
    "groups": [GROUP],
    "agents": [AGENT],
    "shards": [{"shard": str, "replicas": [REPLICA], "agree": bool}],
    "services": [SERVICE],
    "missing": [{"id": str, "component": str, "address": str, "registered": int}],
    "degraded": [{"component": str, "why": str}],
    "healthy": bool,
}


def assert_schema(value: Any, schema: Any, where: str = "status") -> None:
    """``value`` has exactly ``schema``'s keys, each of its type; a list's items, a map's
    keys and values, each of the one shape given."""
    if isinstance(schema, list):
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            assert_schema(item, schema[0], f"{where}[{i}]")
    elif isinstance(schema, dict) and len(schema) == 1 and isinstance(next(iter(schema)), type):
        (key_type, value_type) = next(iter(schema.items()))
        assert isinstance(value, dict), where
        for key, item in value.items():
            assert isinstance(key, key_type), f"{where} key {key!r}"
            assert_schema(item, value_type, f"{where}[{key!r}]")
    elif isinstance(schema, dict):
        assert isinstance(value, dict) and set(value) == set(schema), f"{where}: {sorted(value)}"
        for key, shape in schema.items():
            assert_schema(value[key], shape, f"{where}.{key}")
    else:
        assert isinstance(value, schema) and not (isinstance(value, bool) and schema in (int, float)), (
            f"{where}: {value!r} is not {schema}"
        )


def _status(zk: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "artimon", "status", "--zk", zk, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    view: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == (0 if view["healthy"] else 1), done.stderr
    return view


@pytest.fixture
def up(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``artimon up --demo --kafka --no-spark`` on free ports: (its ZooKeeper, its API's URL)."""
    env = {k: v for k, v in os.environ.items() if k not in ("ARTIMON_ZK", "ARTIMON_KAFKA")}
    command = [sys.executable, "-m", "artimon", "up", "--demo", "--kafka", "--no-spark", "--interval", "2"]
    command += [
        "--data-dir",
        str(tmp_path / "data"),
        "--zk-port",
        "0",
        "--api-port",
        "0",
        "--thrift-port",
        "0",
    ]
    with open(tmp_path / "up.log", "w") as log:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    lines = Lines(process.stdout)
    try:
        zk = lines.until(lambda line: line.startswith("[ready] zookeeper"), LOADED, "ZooKeeper's line")
        api = lines.until(lambda line: line.startswith("[ready] query api"), LOADED, "the API's line")
        lines.until(lambda line: line.startswith("[ready] status"), LOADED, "the registrations' line")
        yield zk.split()[2], api.split()[3].removesuffix("/api/v1/query")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
        lines.rest()
        assert process.stdout is not None
        process.stdout.close()


def _all_alive(view: dict[str, Any]) -> bool:
    agents = view["agents"]
    return (
        view["healthy"]
        and bool(agents)
        and all(a["last_round_ms"] for a in agents if "polling" in a["roles"])
        and all(r["series"] for s in view["shards"] for r in s["replicas"])
        and {s["kind"] for s in view["services"]} == {"api", "kafka"}
    )


@pytest.mark.slow
def test_status_of_a_healthy_up_shows_every_part_alive_in_json_text_and_the_page(
    up: tuple[str, str], tmp_path: Path
) -> None:
    zk, api = up
    views: list[dict[str, Any]] = []

    def alive() -> bool:
        views.append(_status(zk))
        return _all_alive(views[-1])

    wait_until(alive, LOADED, "a healthy view")
    view = views[-1]
    assert_schema(view, SCHEMA)
    assert [(m["up"], m["mode"]) for m in view["zookeeper"]] == [(True, "standalone")]
    assert view["leader"] == zk and view["degraded"] == [] and view["registry"] == ""
    (group,) = view["groups"]
    assert group["unowned"] == 0 and group["endpoints"] == len(group["owners"]) >= 4  # 3 demo apps, the agent
    (agent,) = view["agents"]
    assert agent["up"] and agent["roles"] == ["polling", "store"] and agent["interval_s"] == 2.0
    assert agent["members"] == [f"default/{group['members'][0]['id']}"]
    ((replica,),) = [s["replicas"] for s in view["shards"]]
    assert replica["up"] and replica["series"] > 0
    kafka = next(s for s in view["services"] if s["kind"] == "kafka")
    assert kafka["up"] and kafka["alive"] == kafka["expect"] == 1 and "controller" in kafka["detail"]

    text = subprocess.run(
        [sys.executable, "-m", "artimon", "status", "--zk", zk], capture_output=True, text=True, timeout=120
    ).stdout
    assert "healthy" in text.splitlines()[0] and "agent group default: 1 alive" in text
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: apt-get install -y chromium (.ci/run does it)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.goto(f"{api}/status")
            expect(page.locator("#verdict")).to_have_text("healthy: every part answered", timeout=60_000)
            expect(page.locator("#screen")).to_contain_text("vhms shard default: 1/1 up, replicas agree")
            (ROOT / "test-artifacts").mkdir(exist_ok=True)
            page.screenshot(path=str(ROOT / "test-artifacts" / "status-page.png"), full_page=True)
        finally:
            browser.close()
    served = json.loads(subprocess.run(["curl", "-s", f"{api}/api/v1/status"], capture_output=True).stdout)
    assert_schema(served, SCHEMA)


def _view(zk: str, seen: list[SiteStatus]) -> SiteStatus:
    """The view now, kept in ``seen`` (the last one is what a failed wait shows)."""
    seen.append(collect(zk))
    return seen[-1]


def _named(status: SiteStatus, component: str) -> str | None:
    return next((f.why for f in status.degraded if f.component.startswith(component)), None)


@pytest.mark.slow
def test_status_names_a_killed_vhms_and_a_killed_agent_with_why(tmp_path: Path) -> None:
    with Stack(tmp_path, interval=2) as stack:
        views: list[SiteStatus] = []
        wait_until(
            lambda: (
                _view(stack.zk, views).healthy
                and bool(views[-1].agents and views[-1].shards and views[-1].services)
            ),
            LOADED,
            "a healthy view of the stack",
        )
        assert [s.kind for s in views[-1].services] == ["api"]

        stack.kill_vhms()
        wait_until(lambda: _named(_view(stack.zk, views), "vhms shard"), LOADED, "VHMS named")
        why = _named(views[-1], "vhms shard")
        assert why is not None and why.startswith("down: ")  # its replica refused, or its znode gone
        stack.start_vhms()
        wait_until(lambda: collect(stack.zk).healthy, LOADED, "VHMS back, the view healthy")

        stack.kill_agent()
        wait_until(lambda: _named(_view(stack.zk, views), "agent"), LOADED, "the agent named")
        found = {f.component: f.why for f in views[-1].degraded}
        assert any(
            w.startswith("down: its monitoring") for c, w in found.items() if c.startswith("agent ")
        ) or (found.get("agent group default", "").startswith("no agent alive")), found
        wait_until(
            lambda: _named(_view(stack.zk, views), "agent group default"),
            LOADED,
            "the group without its agent once its session expired",
        )
        assert (
            _named(views[-1], "agent group default")
            == f"no agent alive: {len(stack.contexts)} endpoints unpolled"
        )


@pytest.mark.slow
def test_a_killed_zookeeper_member_is_shown_down_and_the_new_leader_named(tmp_path: Path) -> None:
    with ZooKeeperEnsemble(tmp_path / "zk", ["127.0.0.1"] * 3, tick_time_ms=500) as ensemble:
        zk = f"{ensemble.hosts}/artimon"
        views: list[SiteStatus] = []
        wait_until(lambda: _view(zk, views).leader, LOADED, "a leader")
        before = views[-1]
        assert sorted(m.mode for m in before.zookeeper) == ["follower", "follower", "leader"]
        assert before.healthy and before.registry == ""
        leader = ensemble.leader()
        assert leader is not None and before.leader == f"127.0.0.1:{leader.port}"

        leader.kill()
        wait_until(
            lambda: _view(zk, views).leader not in (None, before.leader),
            LOADED,
            "a new leader",
        )
        after = views[-1]
        down = {m.address: m.error for m in after.zookeeper if not m.up}
        assert down == {before.leader: "connection refused: not running"}
        assert [f.component for f in after.degraded] == [f"zookeeper {before.leader}"]
        assert after.registry == "", "two members of three keep the quorum: the tree is read"


@pytest.mark.slow
def test_status_reads_hdfs_and_a_spark_master_their_launchers_registered(
    tmp_path: Path, zk_hosts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``artimon hdfs`` registers with ``$ARTIMON_ZK`` set (:func:`launcher_service`),
    and a Spark master as ``up --cluster`` registers it: their DataNode and worker counted,
    each killed -9 named with how many are alive."""
    monkeypatch.setenv("ARTIMON_ZK", zk_hosts)
    views: list[SiteStatus] = []

    def services_alive() -> bool:
        services = {s.kind: s for s in _view(zk_hosts, views).services}
        return set(services) == {"hdfs", "spark"} and all(s.up and s.alive == 1 for s in services.values())

    with (
        HdfsServer(tmp_path / "hdfs") as hdfs,
        SparkCluster(tmp_path / "spark", worker_memory="512m") as spark,
    ):
        registrations = [
            launcher_service("hdfs", hdfs.webhdfs, 1),
            register_service(zk_hosts, "spark", f"127.0.0.1:{spark.web_port}", spark.web_url, expect=1),
        ]
        try:
            wait_until(services_alive, LOADED, "HDFS and Spark answering with one member each")
            assert views[-1].healthy, views[-1].degraded
            hdfs.kill_datanode()
            spark.kill_worker()
            wait_until(
                lambda: (
                    len([f for f in _view(zk_hosts, views).degraded if "0 of 1 members alive" in f.why]) == 2
                ),
                LOADED,
                "the DataNode and the worker named",
            )
        finally:
            for registration in registrations:
                if registration is not None:
                    registration.close()
    found = {f.component.split()[0]: f.why for f in views[-1].degraded}
    assert found["hdfs"].startswith("0 of 1 members alive (NameNode Operational, DataNodes 0 live, 1 dead)")
    assert found["spark"].startswith("0 of 1 members alive (master ALIVE, 0 of 1 workers ALIVE)")
