"""The grown-up topology on eight namespace hosts (``artimon.site.Topology``): every part a
real server in its host's namespace, binding its host's address; samples of applications
with known counters go app -> polling agent -> Kafka -> store agent -> VHMS (both replicas
of each shard) and are read back through both query APIs; then, one after another while
rounds flow, a Kafka node, the ZooKeeper leader, a store agent and a DataNode are killed
(kill -9) and started again and the store agents' host is partitioned, and every sample the
applications exposed is in VHMS once, with its value, on both replicas of its shard (the
accounting table is printed). Root only (namespaces)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from support import wait_until

from artimon.site import Host, Layout, Site, Topology, unavailable_reason
from bookkeeper.testing import formula_value
from bookkeeper.wire import parse_series
from vhms import VhmsClient

needs_root = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))

INTERVAL = 2  # seconds per polling round
VARIABLES = 5  # test.counter{i=0..4} per application
ROUNDS = 5  # rounds checked, once every part is up


def _formula_apps(host: Host, zk: str) -> list[str]:
    """An application whose ``test.counter`` follows ``formula_value`` per round."""
    return [
        *(sys.executable, "-m", "bookkeeper.testing", "--context", f"app-{host.name}"),
        *("--variables", str(VARIABLES), "--aligned", str(INTERVAL), "--zk", zk),
        *("--host", host.address, "--ignore-stdin"),
    ]


Held = dict[tuple[str, int, int], float]  # (context, i, round ms) -> value


def _counters(client: VhmsClient, first: int, last: int) -> Held:
    """What one VHMS member holds of ``test.counter`` for rounds ``first`` to ``last``."""
    result = client.fetch("test.counter", first, last + INTERVAL * 1000, INTERVAL)
    held: Held = {}
    for key, row in zip(result.keys, result.values, strict=True):
        _, labels = parse_series(key)
        for stamp, value in zip(result.timestamps.tolist(), row.tolist(), strict=True):
            if first <= stamp <= last and not math.isnan(value):
                held[(labels["context"], int(labels["i"]), int(stamp))] = value
    return held


def _replicas(topology: Topology, first: int, last: int) -> dict[tuple[str, str], Held]:
    """Each VHMS member's counters, by (shard, address)."""
    held = {}
    for member in topology.vhms:
        with VhmsClient(member.address, member.port, timeout=30) as client:
            held[(member.shard, member.address)] = _counters(client, first, last)
    return held


def _api_counters(url: str, first: int, last: int) -> Held:
    """The counters as the query API answers ``fetch("test.counter")`` (the DSL)."""
    body = {"query": 'fetch("test.counter")', "start": first, "end": last + INTERVAL * 1000}
    answer = httpx.post(f"{url}/api/v1/query", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    held: Held = {}
    for series in answer.json()["series"]:
        labels = series["labels"]
        for stamp, value in zip(series["timestamps"], series["values"], strict=True):
            if first <= stamp <= last and value is not None:
                held[(labels["context"], int(labels["i"]), int(stamp))] = value
    return held


def _agent_counters(url: str) -> dict[str, dict[str, float]]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        counters: dict[str, dict[str, float]] = json.loads(answer.read(1 << 20))
    return counters


def _listening(host: Host) -> str:
    """The TCP listeners inside ``host``'s namespace (``ss -ltn``)."""
    done = subprocess.run(
        host.command(["ss", "-Hltn"]), capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout


def _expected(contexts: list[str], first: int, last: int) -> Held:
    step = INTERVAL * 1000
    return {
        (context, i, r): float(formula_value(i, r, step))
        for context in contexts
        for i in range(VARIABLES)
        for r in range(first, last + 1, step)
    }


def _stored(topology: Topology, expected: Held, first: int, last: int) -> dict[tuple[str, str], Held]:
    """Wait until VHMS holds every sample of rounds ``first`` to ``last``; then each shard's
    replicas must agree and the shards together hold exactly ``expected``."""

    def complete() -> bool:
        held = _replicas(topology, first, last)
        return {key for replica in held.values() for key in replica} >= expected.keys()

    wait_until(complete, timeout=240, what=f"rounds {first}..{last} in VHMS")
    held = _replicas(topology, first, last)
    for shard in ("s1", "s2"):
        one, other = [replica for (s, _), replica in held.items() if s == shard]
        assert one == other and one, f"the replicas of shard {shard} disagree"
    assert {key: value for replica in held.values() for key, value in replica.items()} == expected
    return held


def _through_kafka(topology: Topology, samples: int) -> None:
    """The rounds were published by the polling agents (the group shares the endpoints out)
    and taken by the store agents."""
    published = sum(
        _agent_counters(a.monitor_url)["SINK.publish"]["EventDrainSuccessCount"]
        for a in topology.polling_agents.values()
    )
    taken = sum(
        _agent_counters(a.monitor_url)["SOURCE.samples"]["EventAcceptedCount"] for a in topology.store_agents
    )
    assert published >= samples and taken >= samples


def _round_now() -> int:
    step = INTERVAL * 1000
    return int(time.time() * 1000) // step * step


def _hold(rounds: int) -> None:
    time.sleep(rounds * INTERVAL)  # the fault lasts this long: a schedule, not a wait for an outcome


Window = tuple[str, int, int]  # (fault, first round, last round)


def _faults(site: Site, topology: Topology) -> list[Window]:
    """One fault after another while rounds flow, each healed before the next; their windows."""
    windows: list[Window] = []

    def fault(name: str, inject: Callable[[], None], heal: Callable[[], None], rounds: int = 3) -> None:
        began = _round_now()
        inject()
        _hold(rounds)
        heal()
        windows.append((name, began, _round_now()))

    fault("Kafka node on h2 kill -9", lambda: site.kill("h2", "kafka"), lambda: site.restart("h2", "kafka"))
    leader = topology.zookeeper.leader()
    assert leader is not None
    old = next(h.name for h in site.hosts if h.address == leader.host)
    fault(
        f"ZooKeeper leader on {old} kill -9",
        lambda: site.kill(old, "zookeeper"),
        lambda: site.restart(old, "zookeeper", timeout=120),
    )
    fault(
        "store agent 1 kill -9",
        lambda: site.kill("h5", "store agent 1"),
        lambda: site.restart("h5", "store agent 1"),
    )
    fault(
        "HDFS DataNode on h3 kill -9",
        lambda: site.kill("h3", "hdfs datanode"),
        lambda: site.restart("h3", "hdfs datanode", timeout=120),
    )
    fault(
        "store agents' host h5 partitioned", lambda: site.partition("h5"), lambda: site.heal("h5"), rounds=10
    )
    return windows


def _accounting(expected: Held, held: dict[tuple[str, str], Held], windows: list[Window]) -> str:
    """A line per fault window (and the whole run): samples the apps exposed, in VHMS once
    (both replicas of their shard), missing, with another value."""
    rows = [f"{'window':<40} {'rounds':>6} {'exposed':>8} {'in VHMS':>8} {'missing':>8} {'wrong':>6}"]
    union = {key: value for replica in held.values() for key, value in replica.items()}
    first, last = min(k[2] for k in expected), max(k[2] for k in expected)
    for name, begin, end in [*windows, ("the whole run", first, last)]:
        keys = [key for key in expected if begin <= key[2] <= end]
        found = [key for key in keys if key in union]
        wrong = sum(union[key] != expected[key] for key in found)
        rounds = (end - begin) // (INTERVAL * 1000) + 1
        rows.append(
            f"{name:<40} {rounds:>6} {len(keys):>8} {len(found):>8} {len(keys) - len(found):>8} {wrong:>6}"
        )
    return "\n".join(rows)


def _site_rss_mib(site: Site) -> float:
    """The resident memory of every process on the site's hosts, in MiB."""
    total = 0
    for host in site.hosts:
        pids = subprocess.run(
            ["ip", "netns", "pids", host.namespace], capture_output=True, text=True, timeout=30
        )
        for pid in pids.stdout.split():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue  # gone meanwhile
            total += next(
                (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0
            )
    return total / 1024


def _check_placement(site: Site) -> None:
    """Every part is on its host, and each host's servers listen on its own address."""
    assert site.exited() == []
    roles = {component for _, component in site.components}
    assert roles == {
        "zookeeper", "kafka", "hdfs namenode", "hdfs datanode", "spark master", "spark worker",
        "vhms s1", "vhms s2", "store agent 1", "store agent 2", "query api", "apps", "polling agent",
    }  # fmt: skip
    assert sorted(h for h, c in site.components if c == "polling agent") == ["h6", "h7", "h8"]
    for host in site.hosts:
        for line in _listening(host).splitlines():
            address = line.split()[3].rpartition(":")[0].removeprefix("[::ffff:").strip("[]")
            assert address in (host.address, "127.0.0.1", "::1"), (host.name, line)


@needs_root
@pytest.mark.slow
def test_the_full_topology_on_eight_hosts_carries_every_sample_once_through_faults(tmp_path: Path) -> None:
    began = time.monotonic()
    with Site(8, tmp_path) as site:
        layout = Layout.of(8)
        topology = Topology(site, layout, interval=INTERVAL, apps=_formula_apps).start(timeout=300)
        up_s = time.monotonic() - began
        _check_placement(site)
        contexts = [f"app-{name}" for name in layout.app_hosts]
        first = _round_now() + 2 * INTERVAL * 1000  # a round every polling agent polls
        last = first + (ROUNDS - 1) * INTERVAL * 1000
        _stored(topology, _expected(contexts, first, last), first, last)
        _through_kafka(topology, ROUNDS * len(contexts))
        for api in topology.apis:
            assert _api_counters(api.url, first, last) == _expected(contexts, first, last)
            names = httpx.get(f"{api.url}/api/v1/series", params={"match": "test.counter"}, timeout=60).json()
            assert len(names["series"]) == len(contexts) * VARIABLES
        flowing_s = time.monotonic() - began - up_s

        windows = _faults(site, topology)
        assert site.exited() == []
        last = _round_now() + INTERVAL * 1000
        expected = _expected(contexts, first, last)
        held = _stored(topology, expected, first, last)
        for api in topology.apis:
            assert _api_counters(api.url, first, last) == expected
        faults_s = time.monotonic() - began - up_s - flowing_s
        rss_mib = _site_rss_mib(site)
        print("\n" + _accounting(expected, held, windows))
    print(
        f"site of 8 hosts: up in {up_s:.0f} s, {ROUNDS} rounds checked in {flowing_s:.0f} s, "
        f"{len(windows)} faults and the check after them in {faults_s:.0f} s, "
        f"down in {time.monotonic() - began - up_s - flowing_s - faults_s:.0f} s; "
        f"its processes' resident memory {rss_mib:.0f} MiB"
    )
