"""The grown-up topology on eight namespace hosts (``artimon.site.Topology``): every part a
real server in its host's namespace, binding its host's address; samples of applications
with known counters go app -> polling agent -> Kafka -> store agent -> VHMS (both replicas
of each shard) and are read back through both query APIs. Root only (namespaces)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
import urllib.request
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


@needs_root
@pytest.mark.slow
def test_the_full_topology_on_eight_hosts_carries_samples_from_apps_to_both_query_apis(
    tmp_path: Path,
) -> None:
    began = time.monotonic()
    with Site(8, tmp_path) as site:
        layout = Layout.of(8)
        topology = Topology(site, layout, interval=INTERVAL, apps=_formula_apps).start(timeout=300)
        up_s = time.monotonic() - began
        assert site.exited() == []
        roles = {component for _, component in site.components}
        assert roles == {
            "zookeeper", "kafka", "hdfs namenode", "hdfs datanode", "spark master", "spark worker",
            "vhms s1", "vhms s2", "store agent 1", "store agent 2", "query api", "apps", "polling agent",
        }  # fmt: skip
        assert sorted(h for h, c in site.components if c == "polling agent") == ["h6", "h7", "h8"]
        # each host's servers listen on its own address, nothing on a wildcard
        for host in site.hosts:
            for line in _listening(host).splitlines():
                address = line.split()[3].rpartition(":")[0].removeprefix("[::ffff:").strip("[]")
                assert address in (host.address, "127.0.0.1", "::1"), (host.name, line)

        step = INTERVAL * 1000
        first = (int(time.time() * 1000) // step + 2) * step  # a round every polling agent polls
        last = first + (ROUNDS - 1) * step
        contexts = [f"app-{name}" for name in layout.app_hosts]
        expected = {
            (context, i, r): float(formula_value(i, r, step))
            for context in contexts
            for i in range(VARIABLES)
            for r in range(first, last + 1, step)
        }

        def stored() -> bool:
            held = _replicas(topology, first, last)
            return {key for replica in held.values() for key in replica} == expected.keys()

        wait_until(stored, timeout=120, what=f"rounds {first}..{last} in VHMS")
        # replicas of a shard agree, whatever their order of ingest; the shards split the series
        held = _replicas(topology, first, last)
        for shard in ("s1", "s2"):
            first_replica, second_replica = [h for (s, _), h in held.items() if s == shard]
            assert first_replica == second_replica and first_replica
        assert {k: v for replica in held.values() for k, v in replica.items()} == expected
        # the samples went through Kafka: published by the polling agents (the group shares the
        # endpoints out), taken by the store agents
        published = sum(
            _agent_counters(a.monitor_url)["SINK.publish"]["EventDrainSuccessCount"]
            for a in topology.polling_agents.values()
        )
        taken = sum(
            _agent_counters(a.monitor_url)["SOURCE.samples"]["EventAcceptedCount"]
            for a in topology.store_agents
        )
        assert published >= ROUNDS * len(contexts) and taken >= ROUNDS * len(contexts)
        for api in topology.apis:
            assert _api_counters(api.url, first, last) == expected
            names = httpx.get(f"{api.url}/api/v1/series", params={"match": "test.counter"}, timeout=60).json()
            assert len(names["series"]) == len(contexts) * VARIABLES
        flowing_s = time.monotonic() - began - up_s
    print(f"\nsite of 8 hosts: up in {up_s:.0f} s, {ROUNDS} rounds checked in {flowing_s:.0f} s, "
          f"down in {time.monotonic() - began - up_s - flowing_s:.0f} s")  # fmt: skip
