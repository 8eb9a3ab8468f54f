"""``artimon config push|pull|diff`` against two real ``artimon agent`` processes of one group
polling real applications with known counters (issue 29): a bad configuration is refused
with nothing changed, a good one is applied by every agent of the group, and one that an
agent refuses is rolled back; every round of every application lands, across it all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import fastavro
import numpy as np
import pytest
from kazoo.client import KazooClient

from artimon.stack import agent_properties
from artimon.testing import StackProcess, start_ready_process
from bookkeeper import resolve_zk
from bookkeeper.testing import AppProcess, formula_value, start_app
from bookkeeper.zk import ZkAuth
from collector_agent import Agent, AgentReport, ConfigFollower, ConfigStore, ConfigTarget

INTERVAL = 3  # seconds per round
APPS, ENDPOINTS, VARIABLES = 2, 2, 5
GROUP = ConfigTarget("group", "edge")


def edge(zk_hosts: str, *, batch: int = 100, capacity: int = 10_000, roll: object = 2) -> str:
    """The group's configuration: polls the test apps into memory, lands them (raw sink) in
    ``${LANDING}``, each agent's own directory."""
    return agent_properties(
        "a",
        sources={
            "poll": {
                **{"type": "artimon", "zk": zk_hosts, "interval": INTERVAL, "group": "pollers"},
                **{"contexts": "cfg.*", "catchup": 0.8, "readTimeout": 1, "connectTimeout": 1},
                "channels": "c1",
            }
        },
        channels={"c1": {"type": "memory", "capacity": capacity, "transactionCapacity": 1000}},
        sinks={
            "land": {
                "type": "raw",
                "channel": "c1",
                "directory": "${LANDING}",
                "batchSize": batch,
                "rollInterval": roll,
            }
        },
    )


def config(
    *args: str,
    env: dict[str, str],
    zk_hosts: str,
    target: tuple[str, str] = ("--group", "edge"),
    top: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """``artimon [top] config ARGS --group edge`` with ``env`` (and no credentials of ours)."""
    own = {k: v for k, v in os.environ.items() if not k.startswith("ARTIMON_ZK_AUTH")}
    return subprocess.run(
        [sys.executable, "-m", "artimon", *top, "config", *args, *target, "--zk", zk_hosts],
        env={**own, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def store(zk_hosts: str) -> Iterator[ConfigStore]:
    connect, layout = resolve_zk(zk_hosts)
    client = KazooClient(hosts=connect)
    client.start(timeout=30)
    yield ConfigStore(client, layout, None)
    client.stop()
    client.close()


def landed(directories: list[Path]) -> dict[tuple[str, int], dict[int, int]]:
    """(context, round) -> {i: test.counter{i} value} from every landing file."""
    found: dict[tuple[str, int], dict[int, int]] = {}
    for path in sorted(p for d in directories for p in d.glob("*.avro")):
        with open(path, "rb") as data:
            for record in fastavro.reader(data):
                names = record["names"]  # type: ignore[index, call-overload]
                label_sets = record["label_sets"]  # type: ignore[index, call-overload]
                ids = np.frombuffer(record["name_ids"], "<i4")  # type: ignore[index, call-overload]
                sets = np.frombuffer(record["label_set_ids"], "<i4")  # type: ignore[index, call-overload]
                values = np.frombuffer(record["values"], "<i8")  # type: ignore[index, call-overload]
                counters = {}
                for name_id, set_id, value in zip(ids.tolist(), sets.tolist(), values.tolist(), strict=True):
                    labels = dict(pair.split("=", 1) for pair in label_sets[set_id].split(",") if pair)
                    if names[name_id] == "test.counter":
                        counters[int(labels["i"])] = value
                key = (record["context"], record["round_ms"])  # type: ignore[index, call-overload]
                found.setdefault(key, {}).update(counters)
    return found


def reports(store: ConfigStore) -> dict[str, AgentReport]:
    return {k: v for k, v in store.reports().items() if isinstance(v, AgentReport)}


@pytest.mark.slow
def test_push_refuses_a_bad_config_applies_a_good_one_everywhere_and_rolls_back_a_refused_one(
    tmp_path: Path,
    zk_hosts: str,
    store: ConfigStore,
    monkeypatch: pytest.MonkeyPatch,
    wait: Callable[..., None],
) -> None:
    local = tmp_path / "edge.properties"
    local.write_text(edge(zk_hosts))
    landings = [tmp_path / f"landing-{n}" for n in (1, 2)]
    apps: list[AppProcess] = []
    agents: list[StackProcess] = []
    check = {"LANDING": str(tmp_path / "check"), "EDGE_ROLL": "4"}  # the pusher's environment
    try:
        apps += [
            start_app(f"cfg{k}", zk_hosts, variables=VARIABLES, endpoints=ENDPOINTS, aligned=INTERVAL)
            for k in range(APPS)
        ]
        for n, landing in enumerate(landings, 1):
            monkeypatch.setenv("LANDING", str(landing))
            if n == 1:
                monkeypatch.setenv("EDGE_ROLL", "4")  # the second agent's host lacks it
            else:
                monkeypatch.delenv("EDGE_ROLL")
            command = [
                sys.executable,
                "-m",
                "artimon",
                "agent",
                "-f",
                str(local),
                "-n",
                "a",
                "--zk",
                zk_hosts,
            ]
            command += ["--config-group", "edge", "--agent-id", f"edge-{n}", "--reload-interval", "0"]
            command += ["--no-monitor"]
            process, line = start_ready_process(command, tmp_path / f"edge-{n}.log", "running", timeout=120)
            agents.append(StackProcess(process, tmp_path / f"edge-{n}.log", line))
        wait(lambda: set(reports(store)) == {"edge-1", "edge-2"}, timeout=60, what="both agents' reports")
        first = (int(time.time()) // INTERVAL + 2) * INTERVAL * 1000  # both agents poll from here

        # a bad configuration: refused, naming the key; nothing written, nothing reloaded
        bad = tmp_path / "bad.properties"
        bad.write_text(edge(zk_hosts).replace("batchSize = 100", "batchSize = many"))
        refused = config("push", "-f", str(bad), env=check, zk_hosts=zk_hosts)
        assert refused.returncode == 1, refused.stderr
        assert "bad.properties refused, nothing written: a.sinks.land.batchSize" in refused.stderr
        typo = tmp_path / "typo.properties"
        typo.write_text(edge(zk_hosts).replace("rollInterval", "rollinterval"))
        refused = config("push", "-f", str(typo), env=check, zk_hosts=zk_hosts)
        assert refused.returncode == 1
        assert (
            "a.sinks.land.rollinterval is not a known key, ignored; did you mean a.sinks.land.rollInterval?"
            in (refused.stderr)
        )
        assert store.versions(GROUP) == [] and store.current(GROUP) is None
        assert {r.version for r in reports(store).values()} == {0}

        # a good one: every agent of the group applies it, in place
        good = tmp_path / "good.properties"
        good.write_text(edge(zk_hosts, batch=50, capacity=20_000, roll=3))
        pushed = config("push", "-f", str(good), env=check, zk_hosts=zk_hosts)
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
        assert "group edge: version 1 is current (its first); 2 agents follow it" in pushed.stdout
        assert (
            "  edge-1: applied version 1" in pushed.stdout and "  edge-2: applied version 1" in pushed.stdout
        )
        assert "group edge: version 1 applied by 2 of 2 agents" in pushed.stdout
        assert {(r.follows, r.version) for r in reports(store).values()} == {("group/edge", 1)}

        # one that the second agent refuses (its host lacks ${EDGE_ROLL}): rolled back
        risky = tmp_path / "risky.properties"
        risky.write_text(edge(zk_hosts, batch=50, capacity=20_000, roll="${EDGE_ROLL}"))
        rolled = config("push", "-f", str(risky), env=check, zk_hosts=zk_hosts)
        assert rolled.returncode == 1, rolled.stdout + rolled.stderr
        assert "  edge-1: applied version 2" in rolled.stdout
        reason = "a.sinks.land.rollInterval: environment variable ${EDGE_ROLL} is not set"
        assert f"  edge-2: refused version 2: {reason}" in rolled.stdout
        assert "group edge: version 2 refused by edge-2; rolled back to version 1" in rolled.stderr
        assert "  edge-1: back on version 1" in rolled.stdout
        current = store.current(GROUP)
        assert current is not None and (current.version, current.rolled_back_from) == (1, 2)
        assert {(k, r.version) for k, r in reports(store).items()} == {("edge-1", 1), ("edge-2", 1)}

        pulled = config("pull", env={}, zk_hosts=zk_hosts)
        assert pulled.returncode == 0 and pulled.stdout == good.read_text()
        differs = config("diff", "-f", str(risky), env={}, zk_hosts=zk_hosts)
        assert differs.returncode == 1
        assert "-a.sinks.land.rollInterval = 3\n+a.sinks.land.rollInterval = ${EDGE_ROLL}\n" in differs.stdout
        assert config("diff", "--version", "1", "--version", "1", env={}, zk_hosts=zk_hosts).returncode == 0
        history = config("pull", "--history", env={}, zk_hosts=zk_hosts)
        assert (
            "* v1" in history.stdout and "  v2" in history.stdout and "rolled back from 2" in history.stdout
        )

        # two more rounds after the last reload, then a clean stop: what the channels hold lands
        last = (int(time.time()) // INTERVAL + 2) * INTERVAL * 1000
        wait(
            lambda: time.time() * 1000 > last + INTERVAL * 1000 * 0.9, timeout=30, what="round after the last"
        )
    finally:
        for agent in agents:
            agent.stop()
        for app in apps:
            app.kill(signal.SIGTERM)
    held = landed(landings)
    step = INTERVAL * 1000
    contexts = [f"cfg{k}-{n}" for k in range(APPS) for n in range(ENDPOINTS)]
    expected = {
        (context, r): {i: formula_value(i, r, step) for i in range(VARIABLES)}
        for r in range(first, last + 1, step)
        for context in contexts
    }
    missing = sorted(key for key in expected if key not in held)
    assert missing == [], f"rounds lost: {missing}"
    assert {key: held[key] for key in expected} == expected


def test_push_and_pull_with_the_platforms_credentials_and_anonymous_clients_refused(
    tmp_path: Path, zk_hosts: str, wait: Callable[..., None]
) -> None:
    secret = tmp_path / "zk.auth"  # as artimon up makes it
    secret.write_text("artimon:s3cr3t-for-the-test\n")
    secret.chmod(0o600)
    auth = ZkAuth.from_file(secret)
    text = agent_properties(
        "a1",
        sources={"r1": {"type": "seq", "totalEvents": 0, "channels": "c1"}},
        channels={"c1": {"type": "memory"}},
        sinks={"k1": {"type": "null", "channel": "c1"}},
    )
    local = tmp_path / "solo.properties"
    local.write_text(text.replace("type = null", "type = logger"))
    agent = Agent.from_properties(text, "a1", {})
    agent.start()
    follower = ConfigFollower(agent, zk_hosts, agent_id="solo", zk_auth=auth, refresh=1.0)
    follower.start()
    connect, layout = resolve_zk(zk_hosts)
    admin = KazooClient(hosts=connect, auth_data=auth.auth_data)
    admin.start(timeout=30)
    solo = ("--agent", "solo")
    try:
        wait(lambda: admin.exists(layout.config_status("solo")), what="the agent's report")
        pushed = config(
            "push",
            "-f",
            str(local),
            env={"ARTIMON_ZK_AUTH_FILE": str(secret)},
            zk_hosts=zk_hosts,
            target=solo,
        )
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
        assert "  solo: applied version 1" in pushed.stdout and agent.spec.sinks["k1"].type == "logger"
        assert admin.get_acls(f"{layout.agent_config('solo')}/v0000000001")[0] == auth.acl(private=True)
        for action in (("pull",), ("push", "-f", str(local))):
            anonymous = config(*action, env={}, zk_hosts=zk_hosts, target=solo)
            assert anonymous.returncode == 2, anonymous.stdout + anonymous.stderr
            assert "access refused" in anonymous.stderr
        pulled = config("pull", env={}, zk_hosts=zk_hosts, target=solo, top=("--zk-auth-file", str(secret)))
        assert pulled.returncode == 0 and pulled.stdout == local.read_text()
    finally:
        admin.stop()
        admin.close()
        follower.stop()
        agent.stop()


def test_an_agent_that_does_not_answer_is_named_and_nothing_is_rolled_back(
    tmp_path: Path, zk_hosts: str, store: ConfigStore
) -> None:
    # a report of an agent of the group that never applies anything (hung, or partitioned)
    silent = AgentReport("edge", "", 0, 0, "", 0)
    store.secure(store.layout.config_statuses)
    store.client.create(store.layout.config_status("edge-9"), silent.to_json(), ephemeral=True)
    local = tmp_path / "edge.properties"
    local.write_text(edge(zk_hosts))
    pushed = config(
        "push", "-f", str(local), "--timeout", "2", env={"LANDING": str(tmp_path)}, zk_hosts=zk_hosts
    )
    assert pushed.returncode == 3, pushed.stdout + pushed.stderr
    assert "group edge: version 1 is current (its first); 1 agent follows it" in pushed.stdout
    assert "group edge: no answer within 2 s from edge-9" in pushed.stderr
    current = store.current(GROUP)
    assert current is not None and current.version == 1  # it applies the version when it comes back
    again = config("push", "-f", str(local), env={"LANDING": str(tmp_path)}, zk_hosts=zk_hosts)
    assert again.returncode == 0 and "version 1 is current and the same; nothing pushed" in again.stdout
