"""The vhms sink against two real VHMS shards found in a real ZooKeeper."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from artimon.stack import agent_properties
from bookkeeper import Bookkeeper
from bookkeeper.export import write_snapshot_file
from collector_agent import Agent
from query_dsl import ShardedSource
from vhms.server import Store, VhmsService


def properties(directory: Path, zk: str) -> str:
    """An artimon_file source on ``directory`` into the vhms sink, at the samples' own times."""
    files = {
        "type": "artimon_file",
        "directory": directory,
        "interval": 0.1,
        "maxBackoffSleep": 50,
        "channels": "ch",
    }
    out = {"type": "vhms", "channel": "ch", "zk": zk, "time": "sample", "timeout": 5, "maxBackoffSleep": 100}
    return agent_properties(
        "a",
        sources={"files": files},
        channels={"ch": {"type": "memory", "capacity": 1000}},
        sinks={"out": out},
    )


APPS = 4
VARIABLES = 50


def write_round(directory: Path, minute_ms: int, value: int) -> None:
    for app in range(APPS):
        bk = Bookkeeper(f"app{app}", labels={"module": f"app{app}"}, environ={})
        for i in range(VARIABLES):
            bk.integer("requests", path=f"/p{i}").set(value)
        for var in bk._vars.values():
            var._ts = minute_ms / 1000  # the sample's own time: this round's minute
        write_snapshot_file(bk, directory / f"app{app}.artimon")


def total(shards: list[VhmsService]) -> int:
    return sum(s.store.series for s in shards)


def values_at(shards: list[VhmsService], minute_ms: int) -> dict[str, float]:
    found: dict[str, float] = {}
    for shard in shards:
        result = shard.store.fetch("requests", minute_ms, minute_ms + 60_000, resolution=60)
        for key, row in zip(result.keys, result.values[:, 0].tolist(), strict=True):
            assert key not in found, f"{key} is in two shards"
            if not np.isnan(row):
                found[key] = row
    return found


@pytest.mark.slow
def test_two_shards_share_the_series_and_a_restarted_shard_loses_nothing(
    tmp_path: Path, zk_hosts: str, wait: Callable[..., None]
) -> None:
    shard_a = VhmsService(Store(), shard="a", http_port=None, snapshot_dir=tmp_path / "a", snapshot_every=0)
    shard_b = VhmsService(Store(), shard="b", http_port=None, snapshot_dir=tmp_path / "b", snapshot_every=0)
    shard_a.start(zk_hosts, session_timeout=30.0)
    shard_b.start(zk_hosts, session_timeout=30.0)
    drop = tmp_path / "run"
    drop.mkdir()
    minute = (int(time.time() * 1000) // 60_000 - 5) * 60_000
    agent = Agent.from_properties(properties(drop, zk_hosts), "a", {})
    agent.start()
    sink = agent.sinks["out"]
    shards = [shard_a, shard_b]
    try:
        wait(lambda: len(sink.shards) == 2, what="the sink to see both shards")  # type: ignore[attr-defined]
        write_round(drop, minute, 1)
        wait(lambda: len(values_at(shards, minute)) == APPS * VARIABLES, what="round 1 stored")
        assert shard_a.store.series > 40 and shard_b.store.series > 40  # both take a share

        # shard b goes down mid-flow (its ZooKeeper session outlives it, as in a quick restart)
        shard_b.thrift.stop()
        shard_b.snapshot()
        committed = agent.channels["ch"].metrics()["EventTakeSuccessCount"]
        write_round(drop, minute + 60_000, 2)
        wait(lambda: sink.metrics()["ConnectionFailedCount"] >= 2, what="deliveries to b failing")
        # nothing left the channel: every failed batch was rolled back into it
        assert agent.channels["ch"].metrics()["EventTakeSuccessCount"] == committed
        assert len(values_at([shard_a], minute + 60_000)) < APPS * VARIABLES  # b's share is not rerouted

        # the old service object still holds its directory: the successor gets a copy of it
        shutil.copytree(
            tmp_path / "b", tmp_path / "b-restarted", ignore=shutil.ignore_patterns("in_use.lock")
        )
        restarted = VhmsService(
            Store(),
            shard="b",
            port=shard_b.port,
            http_port=None,
            snapshot_dir=tmp_path / "b-restarted",
            snapshot_every=0,
        )
        restarted.start(zk_hosts, session_timeout=30.0)
        assert shard_b.registration is not None
        shard_b.registration.close()  # the old session ends; the successor's node stays
        shards = [shard_a, restarted]
        wait(
            lambda: len(values_at(shards, minute + 60_000)) == APPS * VARIABLES,
            timeout=30,
            what="round 2 stored after the restart",
        )
        assert set(values_at(shards, minute).values()) == {1.0}  # round 1 survived via the snapshot
        assert set(values_at(shards, minute + 60_000).values()) == {2.0}
        assert agent.channels["ch"].size == 0
        restarted.stop()
    finally:
        agent.stop()
        shard_a.stop()


@pytest.mark.slow
def test_a_replica_killed_during_rounds_and_queries_leaves_no_gap_and_no_error(
    tmp_path: Path, zk_hosts: str, wait: Callable[..., None]
) -> None:
    """Shard s1 has two members. One dies mid-flow while its ZooKeeper session lives on
    (a crash before the session expires): the sink goes on writing to the other member,
    queries fail over to it, and every round stays whole."""
    replicas = [VhmsService(Store(), shard="s1", http_port=None) for _ in range(2)]
    for replica in replicas:
        replica.start(zk_hosts, session_timeout=30.0)
    drop = tmp_path / "run"
    drop.mkdir()
    first = (int(time.time() * 1000) // 60_000 - 8) * 60_000
    agent = Agent.from_properties(properties(drop, zk_hosts), "a", {})
    agent.start()
    sink = agent.sinks["out"]
    reader = ShardedSource(zk_hosts, timeout=5.0)
    errors: list[BaseException] = []
    answers: list[int] = []
    stop = threading.Event()

    def query() -> None:
        while not stop.is_set():
            try:
                result = reader.fetch("requests", first, first + 8 * 60_000, 60)
                answers.append(int(np.isfinite(result.values).sum()))
            except BaseException as exc:  # what this test exists to catch
                errors.append(exc)
                return

    querying = threading.Thread(target=query)
    try:
        wait(lambda: len(sink.shards.get("s1", [])) == 2, what="the sink to see both replicas")  # type: ignore[attr-defined]
        wait(lambda: len(reader.shards.get("s1", [])) == 2, what="the reader to see both replicas")
        # the member reads go to first dies: queries must fail over
        victim = next(r for r in replicas if (r.host, r.port) == reader.shards["s1"][0])
        survivor = next(r for r in replicas if r is not victim)
        querying.start()
        for n in range(6):
            minute = first + n * 60_000
            write_round(drop, minute, n + 1)
            wait(lambda m=minute: len(values_at([survivor], m)) == APPS * VARIABLES, what=f"round {n} stored")
            if n == 2:
                assert len(values_at([victim], minute)) == APPS * VARIABLES  # both took every write
                victim.thrift.stop()  # dead, but still registered
        whole = APPS * VARIABLES * 6
        wait(lambda: answers and answers[-1] == whole, what="a query to see all six rounds")
        stop.set()
        querying.join(timeout=30)
        assert not errors, errors
        for n in range(6):
            assert set(values_at([survivor], first + n * 60_000).values()) == {float(n + 1)}
        assert agent.channels["ch"].size == 0
        assert sink.metrics()["ConnectionFailedCount"] == 0  # no batch was refused
        assert sink.client.stats["member_failures"] >= 1  # type: ignore[attr-defined]
        assert reader.stats["member_failures"] >= 1
    finally:
        stop.set()
        reader.close()
        agent.stop()
        for replica in replicas:
            replica.stop()
