"""Fetches fanned out to every VHMS shard registered in a real ZooKeeper, and merged; the
shard list outlives a ZooKeeper outage."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bookkeeper.testing import ZooKeeperServer
from bookkeeper.zk import MembershipState
from query_dsl.sources import ShardedSource
from vhms import Store
from vhms.service import VhmsService

MINUTE = 60_000


def test_fetch_merges_every_shard_and_goes_on_while_zookeeper_is_away(
    tmp_path: Path, wait: Callable[..., None]
) -> None:
    now = int(time.time() * 1000) // MINUTE * MINUTE
    zookeeper = ZooKeeperServer(tmp_path / "zk", tick_time_ms=500).start()
    services = []
    source = None
    try:
        for shard in ("east", "west"):
            store = Store()
            store.ingest(
                [f"load{{dc={shard}}}"], np.array([1.0 if shard == "east" else 2.0]), np.array([now])
            )
            service = VhmsService(store, shard=shard, http_port=None)
            service.start(zookeeper.hosts, session_timeout=30.0)
            services.append(service)
        source = ShardedSource(zookeeper.hosts)
        wait(lambda: len(source.shards) == 2, 30, "both shards")
        result = source.fetch("load", now - 10 * MINUTE, now + MINUTE)
        assert sorted(zip(result.keys, np.nanmax(result.values, axis=1).tolist(), strict=True)) == [
            ("load{dc=east}", 1.0),
            ("load{dc=west}", 2.0),
        ]
        zookeeper.stop()
        assert source.membership is not None
        wait(
            lambda: source.membership.state is MembershipState.SUSPENDED,  # type: ignore[union-attr]
            30,
            "the client to see ZooKeeper gone",
        )
        assert len(source.fetch("load", now - 10 * MINUTE, now + MINUTE).keys) == 2
        assert source.label_values("dc") == ["east", "west"]
    finally:
        if source is not None:
            source.close()
        for service in services:
            service.stop()
        zookeeper.stop()
