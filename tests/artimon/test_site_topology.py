"""The grown-up topology on eight namespace hosts (``artimon.site.Topology``): every part a
real server in its host's namespace, binding its host's address; samples of applications
with known counters (two endpoints per app host, so that every polling agent of the group
owns some) go app -> polling agent -> Kafka -> store agent -> VHMS (both replicas of each
shard) and are read back through both query APIs; from Kafka, the history job (Spark's
``raw_ingest --kafka`` on the site's Spark cluster) writes them into Parquet on the site's
HDFS. Then, one after another while rounds flow, each healed before the next is injected: an
app host partitioned longer than the ZooKeeper session, the ZooKeeper leader, a Kafka node,
a VHMS replica (restarted empty: it catches up from its peer), the polling agent owning the
most endpoints, a store agent and a DataNode killed -9 and started again, and the store
agents' host partitioned for a minute.

The accounting (its table printed): the apps' own record is ``formula_value`` per round, so
every sample they exposed is known. A sample is *required* unless no agent could reach it
in its round, which happens in two windows only, both named per fault in the table as
*excused*:

- a partitioned app host's rounds: its own endpoints and those its agent owned, from the
  partition until each is polled again after the heal (the group took the agent's endpoints
  over once its session expired, then handed them back; the host's recovery, its sessions
  and neighbours re-established, is part of the fault). Nobody can reach its own endpoints
  meanwhile, and nobody polls its agent's before its session expires; what its agent, cut
  off too, polled of its own host before presuming its session gone counts as stored, not
  as required;
- the endpoints a killed agent owned, from its death until its ZooKeeper session expired
  and the group took them over: the group cannot tell a dead member from a slow one before
  that.

Every required sample is in VHMS, with its value, on both replicas of its shard (which agree
on every bucket, the replica restarted empty included), and both APIs answer exactly what
the replicas hold; nothing but what the apps exposed is stored. Every record on the Kafka
topic names its endpoint, round and agent: no endpoint was polled by two agents in one
round (counted over the whole topic, asserted 0). The history job rides the faults out (or
starts again from its checkpoint by itself); once it has read the topic to its end, every
required sample is in the Parquet history once with its value, every row of
``test.counter`` there is one the apps exposed, and no (series, time) is there twice
(``site_history.py`` reads it). Root only (namespaces)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from site_history import caught_up, read_history, topic_ends
from support import wait_until

from artimon.site import Host, Layout, Site, Topology
from artimon.stack import KAFKA_TOPIC
from bookkeeper.testing import formula_value
from bookkeeper.wire import parse_series
from vhms import VhmsClient

INTERVAL = 2  # seconds per polling round
VARIABLES = 5  # test.counter{i=0..4} per application
APP_ENDPOINTS = 2  # contexts app-<host>-0, -1 per app host
ROUNDS = 5  # rounds checked, once every part is up
HISTORY_INTERVAL = 10  # seconds between the history job's micro-batches


def _formula_apps(host: Host, zk: str) -> list[str]:
    """An application whose ``test.counter`` follows ``formula_value`` per round."""
    return [
        *(sys.executable, "-m", "bookkeeper.testing", "--context", f"app-{host.name}"),
        *("--endpoints", str(APP_ENDPOINTS), "--variables", str(VARIABLES)),
        *("--aligned", str(INTERVAL), "--zk", zk),
        *("--host", host.address, "--ignore-stdin"),
    ]


Key = tuple[str, int, int]  # (context, i, round ms)
Held = dict[Key, float]  # -> value


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


def _stored(
    topology: Topology, expected: Held, required: set[Key], first: int, last: int
) -> dict[tuple[str, str], Held]:
    """Wait until VHMS holds every ``required`` sample of rounds ``first`` to ``last``; then
    each shard's replicas must agree and the shards together hold only what the apps exposed,
    with its value."""

    missing: list[Key] = []

    def complete() -> bool:
        held = _replicas(topology, first, last)
        missing[:] = sorted(required - {key for replica in held.values() for key in replica})
        return not missing

    try:
        wait_until(complete, timeout=240, what=f"rounds {first}..{last} in VHMS")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {len(missing)} samples missing, {missing[:10]}") from None
    held = _replicas(topology, first, last)
    for shard in ("s1", "s2"):
        one, other = [replica for (s, _), replica in held.items() if s == shard]
        assert one == other and one, f"the replicas of shard {shard} disagree"
    union = {key: value for replica in held.values() for key, value in replica.items()}
    assert union.keys() <= expected.keys(), sorted(union.keys() - expected.keys())[:10]
    assert {key: value for key, value in union.items() if expected[key] != value} == {}
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


def _status(zk: str) -> dict[str, Any]:
    """``artimon status --json`` of the site."""
    command = [sys.executable, "-m", "artimon", "status", "--zk", zk, "--json", "--timeout", "2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr  # 1: degraded
    view: dict[str, Any] = json.loads(done.stdout)
    return view


def _owners(view: dict[str, Any]) -> dict[str, str]:
    """The apps' endpoints (``context/ip:port:uuid``) -> the agent of group ``site`` that owns
    each, as ``artimon status`` computes it (the agents' own reports are endpoints too)."""
    group = next((g for g in view["groups"] if g["group"] == "site"), {"owners": {}})
    return {key: agent for key, agent in group["owners"].items() if key.startswith("app-")}


def _contexts(endpoints: set[str]) -> frozenset[str]:
    return frozenset(key.partition("/")[0] for key in endpoints)


@dataclass
class Fault:
    """A fault's window (rounds, epoch ms) and the samples it excuses (see the module doc):
    ``(contexts, first round, last round)`` no agent could reach."""

    name: str
    began: int
    healed: int = 0
    excused: list[tuple[frozenset[str], int, int]] = field(default_factory=list)
    named: str = ""  # what artimon status said of it while it lasted

    def excuses(self, key: Key) -> bool:
        return any(key[0] in contexts and first <= key[2] <= last for contexts, first, last in self.excused)


class _Schedule:
    """The faults, one after another while rounds flow, each healed before the next."""

    def __init__(self, site: Site, topology: Topology) -> None:
        self.site, self.topology = site, topology
        self.faults: list[Fault] = []

    def _named(self, fault: Fault, component: str, missing: int = 0) -> None:
        """Wait until ``artimon status --json`` says a component starting with ``component``
        is degraded (with ``missing``, that many such are missing: their registrations expired)."""

        def named() -> bool:
            found = [f for f in _status(self.topology.zk)["degraded"] if f["component"].startswith(component)]
            found = [f for f in found if f["why"].startswith("missing: ")] if missing else found
            fault.named = f"{found[0]['component']}: {found[0]['why']}" if found else ""
            return len(found) >= max(missing, 1)

        wait_until(named, timeout=90, what=f"artimon status naming {component!r} ({fault.name})")

    def simple(
        self,
        name: str,
        component: str,
        inject: Callable[[], None],
        heal: Callable[[], None],
        rounds: int = 2,
        missing: int = 0,
    ) -> None:
        """Inject; hold ``rounds`` rounds and until ``artimon status`` named ``component``
        (``missing`` of them missing, if given); heal."""
        fault = Fault(name, _round_now())
        inject()
        held_until = time.monotonic() + rounds * INTERVAL
        self._named(fault, component, missing)
        time.sleep(max(0.0, held_until - time.monotonic()))  # the fault's length: a schedule
        heal()
        fault.healed = _round_now()
        self.faults.append(fault)

    def _owned_by_others(self, agent: str, endpoints: set[str], what: str) -> int:
        """Wait until ``agent`` left the group and the others own ``endpoints``; that round."""

        def taken() -> bool:
            owners = _owners(_status(self.topology.zk))
            return agent not in owners.values() and all(owners.get(k, agent) != agent for k in endpoints)

        wait_until(taken, timeout=120, what=what)
        return _round_now()

    def _handed_back(self, before: dict[str, str], what: str) -> int:
        wait_until(lambda: _owners(_status(self.topology.zk)) == before, timeout=120, what=what)
        return _round_now()

    def _polled_again(self, contexts: frozenset[str], since: int) -> int:
        """Wait until VHMS holds a round of each of ``contexts`` from ``since`` on; the last
        round before every one of them was (the end of the window they were not polled)."""
        firsts: dict[str, int] = {}

        def back() -> bool:
            held = _replicas(self.topology, since, _round_now())
            for replica in held.values():
                for context, _, r in replica:
                    firsts[context] = min(firsts.get(context, r), r)
            return contexts <= firsts.keys()

        wait_until(back, timeout=120, what=f"{sorted(contexts)} polled again")
        return max(firsts[c] for c in contexts) - INTERVAL * 1000

    def app_host_partition(self) -> None:
        """The app host whose agent owns the most endpoints of other hosts, cut off longer
        than the ZooKeeper session: its agent's endpoints taken over, then handed back."""
        before = _owners(_status(self.topology.zk))
        host = max(
            self.topology.layout.app_hosts,
            key=lambda h: sum(a == h and not k.startswith(f"app-{h}-") for k, a in before.items()),
        )
        own = {k for k in before if k.startswith(f"app-{host}-")}  # nobody reaches them
        foreign = {k for k, a in before.items() if a == host} - own
        assert foreign, f"the agent of {host} owns no endpoint of another host: {before}"
        fault = Fault(f"app host {host} partitioned", _round_now())
        self.site.partition(host)
        self._named(fault, f"agent {self.site.host(host).address}:")
        self._owned_by_others(host, foreign, f"the endpoints of {host}'s agent taken over")
        _hold(2)
        self.site.heal(host)
        back = self._handed_back(before, f"the endpoints handed back to {host}'s agent")
        fault.healed = self._polled_again(_contexts(own | foreign), back)
        fault.excused = [(_contexts(own | foreign), fault.began, fault.healed)]
        self.faults.append(fault)

    def polling_agent_kill(self) -> None:
        """The polling agent owning the most endpoints, killed -9: the group takes them over
        once its session expired; started again, it takes them back."""
        before = _owners(_status(self.topology.zk))
        victim = Counter(before.values()).most_common(1)[0][0]
        theirs = {c for c, a in before.items() if a == victim}
        fault = Fault(f"polling agent on {victim} kill -9", _round_now())
        self.site.kill(victim, "polling agent")
        self._named(fault, f"agent {self.site.host(victim).address}:")
        taken = self._owned_by_others(victim, theirs, f"the endpoints of the agent on {victim} taken over")
        _hold(2)
        self.site.restart(victim, "polling agent")
        fault.healed = self._handed_back(before, f"the endpoints handed back to the agent on {victim}")
        fault.excused = [(_contexts(theirs), fault.began, taken)]
        self.faults.append(fault)

    def vhms_replica_empty(self, host: str = "h2", shard: str = "s1") -> None:
        """A replica killed -9, its data deleted, started again empty: ready (``/health``)
        once it caught up from its peer."""
        member = next(
            m for m in self.topology.vhms if m.shard == shard and m.address == self.site.host(host).address
        )
        fault = Fault(f"VHMS {shard} on {host} kill -9, restarted empty", _round_now())
        self.site.kill(host, f"vhms {shard}")
        self._named(fault, f"vhms shard {shard}")  # a replica down (or, catching up, disagreeing)
        for entry in member.data_dir.iterdir():
            if entry.name not in ("process.log", "process.pid"):
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        _hold(2)
        self.site.restart(host, f"vhms {shard}", timeout=180)
        stats = httpx.get(f"{member.http_url}/stats", timeout=30).json()
        assert not stats["catching_up"] and stats["counters"].get("catchup_series", 0) > 0, stats
        fault.healed = _round_now()
        self.faults.append(fault)

    def run(self) -> list[Fault]:
        site, topology = self.site, self.topology
        self.app_host_partition()
        leader = topology.zookeeper.leader()
        assert leader is not None
        old = next(h.name for h in site.hosts if h.address == leader.host)
        self.simple(
            f"ZooKeeper leader on {old} kill -9",
            f"zookeeper {leader.host}:",
            lambda: site.kill(old, "zookeeper"),
            lambda: site.restart(old, "zookeeper", timeout=120),
        )
        self.simple(
            "Kafka node on h2 kill -9",
            "kafka ",
            lambda: site.kill("h2", "kafka"),
            lambda: site.restart("h2", "kafka"),
        )
        self.vhms_replica_empty()
        self.polling_agent_kill()
        stores = site.host(topology.layout.store_agents)
        self.simple(
            "store agent 1 kill -9",
            f"agent {stores.address}:",
            lambda: site.kill(stores.name, "store agent 1"),
            lambda: site.restart(stores.name, "store agent 1"),
        )
        self.simple(
            "HDFS DataNode on h3 kill -9",
            "hdfs ",
            lambda: site.kill("h3", "hdfs datanode"),
            lambda: site.restart("h3", "hdfs datanode", timeout=120),
        )
        self.simple(
            f"store agents' host {stores.name} partitioned 60 s",
            f"agent {stores.address}:",
            lambda: site.partition(stores.name),
            lambda: site.heal(stores.name),
            rounds=60 // INTERVAL,
            missing=2,  # both store agents, once their registrations expired
        )
        return self.faults


Published = dict[tuple[str, str, int], list[str]]  # (context, endpoint, round ms) -> each record's agent


def _published(bootstrap: str) -> Published:
    """Every record on the samples' topic, by its headers (each names its endpoint, round
    and agent): what the agents published."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"site-test-{uuid.uuid4()}", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(KAFKA_TOPIC, timeout=30).topics[KAFKA_TOPIC].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(KAFKA_TOPIC, p), timeout=30)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(KAFKA_TOPIC, p, OFFSET_BEGINNING) for p in partitions])
        positions = dict.fromkeys(partitions, 0)
        records: Published = defaultdict(list)
        deadline = time.monotonic() + 120
        while any(positions[p] < ends[p] for p in partitions):
            assert time.monotonic() < deadline, f"the topic read to {positions} of {ends}"
            for message in consumer.consume(1000, timeout=1):
                assert message.error() is None, message.error()
                positions[message.partition()] = message.offset() + 1
                headers = {k: (v or b"").decode() for k, v in message.headers() or []}
                key = (headers["artimon.context"], headers["artimon.endpoint"], int(headers["artimon.round"]))
                records[key].append(headers["artimon.agent"])
        return records
    finally:
        consumer.close()


def _history(topology: Topology, contexts: list[str], required: set[Key]) -> Held:
    """Wait until the history job has read the topic to its end (as it is now, every round
    required in it); then every required sample is in the Parquet history with its value,
    every ``test.counter`` row there is one the apps exposed (any round), and no (series,
    time) is there twice. The apps' counters it holds."""
    hdfs, ends = topology.hdfs, topic_ends(topology.kafka.bootstrap_servers)

    def read_to_the_end() -> bool:
        done = caught_up(hdfs, ends)
        time.sleep(0 if done else 0.5)  # a micro-batch every few seconds: no need to ask faster
        return done

    wait_until(read_to_the_end, timeout=240, what=f"the history reading the topic to {ends}")
    table = read_history(hdfs)
    series = table.column("series").to_pylist()
    ts = table.column("ts")
    stamps = ts.cast(pa.timestamp("ms", tz=ts.type.tz)).cast(pa.int64()).to_pylist()
    twice = [pair for pair, seen in Counter(zip(series, stamps, strict=True)).items() if seen > 1]
    assert twice == [], f"{len(twice)} (series, time) twice in the history: {twice[:5]}"
    history: Held = {}
    for key, stamp, value in zip(series, stamps, table.column("value").to_pylist(), strict=True):
        name, labels = parse_series(key)
        if name == "test.counter":
            history[(labels["context"], int(labels["i"]), stamp)] = value
    step = INTERVAL * 1000
    foreign = {
        key: value
        for key, value in history.items()
        if key[0] not in contexts or value != formula_value(key[1], key[2], step)
    }
    assert foreign == {}, f"rows the apps did not expose: {sorted(foreign.items())[:10]}"
    missing = sorted(required - history.keys())
    assert missing == [], f"{len(missing)} required samples not in the history: {missing[:10]}"
    return history


def _accounting(expected: Held, union: Held, faults: list[Fault], published: Published, history: Held) -> str:
    """A line per fault window (and the whole run): samples the apps exposed, excused (no
    agent could reach them), in VHMS (once, both replicas of their shard), in the Parquet
    history (once), required and missing (from either), with another value (in either);
    endpoint-rounds polled by two agents."""
    rows = [
        f"{'window':<44} {'rounds':>6} {'exposed':>8} {'excused':>8} {'in VHMS':>8} {'history':>8} "
        f"{'missing':>8} {'wrong':>6} {'2 agents':>8}"
    ]
    first, last = min(k[2] for k in expected), max(k[2] for k in expected)
    whole = Fault("the whole run", first, last)
    for fault in [*faults, whole]:
        keys = [key for key in expected if fault.began <= key[2] <= fault.healed]
        excused = {key for key in keys if any(f.excuses(key) for f in faults)}
        found = [key for key in keys if key in union]
        stored = [key for key in keys if key in history]
        missing = sum(key not in union or key not in history for key in keys if key not in excused)
        wrong = sum(union[key] != expected[key] for key in found)
        wrong += sum(history[key] != expected[key] for key in stored)
        doubled = sum(
            len(set(agents)) > 1
            for (_, _, r), agents in published.items()
            if fault.began <= r <= fault.healed
        )
        rounds = (fault.healed - fault.began) // (INTERVAL * 1000) + 1
        rows.append(
            f"{fault.name:<44} {rounds:>6} {len(keys):>8} {len(excused):>8} {len(found):>8} "
            f"{len(stored):>8} {missing:>8} {wrong:>6} {doubled:>8}"
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
        "history",
    }  # fmt: skip
    assert sorted(h for h, c in site.components if c == "polling agent") == ["h6", "h7", "h8"]
    for host in site.hosts:
        for line in _listening(host).splitlines():
            address = line.split()[3].rpartition(":")[0].removeprefix("[::ffff:").strip("[]")
            assert address in (host.address, "127.0.0.1", "::1"), (host.name, line)


@pytest.mark.usefixtures("netns")
@pytest.mark.slow
def test_the_full_topology_on_eight_hosts_carries_every_sample_once_through_faults(tmp_path: Path) -> None:
    began = time.monotonic()
    with Site(8, tmp_path) as site:
        layout = Layout.of(8)
        topology = Topology(
            site,
            layout,
            interval=INTERVAL,
            apps=_formula_apps,
            app_ready_lines=APP_ENDPOINTS,
            history_interval=HISTORY_INTERVAL,
        ).start(timeout=300)
        up_s = time.monotonic() - began
        _check_placement(site)
        contexts = [f"app-{name}-{k}" for name in layout.app_hosts for k in range(APP_ENDPOINTS)]
        first = _round_now() + 2 * INTERVAL * 1000  # a round every polling agent polls
        last = first + (ROUNDS - 1) * INTERVAL * 1000
        flowing = _expected(contexts, first, last)
        _stored(topology, flowing, set(flowing), first, last)
        _through_kafka(topology, ROUNDS * len(contexts))
        for api in topology.apis:
            assert _api_counters(api.url, first, last) == flowing
            names = httpx.get(f"{api.url}/api/v1/series", params={"match": "test.counter"}, timeout=60).json()
            assert len(names["series"]) == len(contexts) * VARIABLES
        flowing_s = time.monotonic() - began - up_s

        faults = _Schedule(site, topology).run()
        assert site.exited() == []
        last = _round_now() + INTERVAL * 1000
        expected = _expected(contexts, first, last)
        required = {key for key in expected if not any(fault.excuses(key) for fault in faults)}
        held = _stored(topology, expected, required, first, last)
        union = {key: value for replica in held.values() for key, value in replica.items()}
        for api in topology.apis:
            assert _api_counters(api.url, first, last) == union
        published = _published(topology.kafka.bootstrap_servers)
        history = _history(topology, contexts, required)
        faults_s = time.monotonic() - began - up_s - flowing_s
        rss_mib = _site_rss_mib(site)
        print("\n" + _accounting(expected, union, faults, published, history))
        print(
            "\n".join(
                f"{fault.name} ({fault.began}..{fault.healed}): artimon status: {fault.named}"
                for fault in faults
            )
        )
        doubled = {key: agents for key, agents in published.items() if len(set(agents)) > 1}
        print("\n".join(f"polled by two agents: {key} {agents}" for key, agents in sorted(doubled.items())))
        wait_until(lambda: _status(topology.zk)["healthy"], timeout=180, what="artimon status healthy again")
        assert doubled == {}, "endpoints polled by two agents in one round"
    print(
        f"site of 8 hosts: up in {up_s:.0f} s, {ROUNDS} rounds checked in {flowing_s:.0f} s, "
        f"{len(faults)} faults and the check after them in {faults_s:.0f} s, "
        f"down in {time.monotonic() - began - up_s - flowing_s - faults_s:.0f} s; "
        f"its processes' resident memory {rss_mib:.0f} MiB"
    )
