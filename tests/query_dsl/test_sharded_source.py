"""Fetches fanned out to every VHMS shard registered in a real ZooKeeper, and merged; the
shard list outlives a ZooKeeper outage; the query API over connections VHMS closed while
idle, and over TLS."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
from support import TlsFiles

from artimon.servers import ZooKeeperServer
from bookkeeper.ground import BackgroundServer, MembershipState
from bookkeeper.wire import client_context, server_context
from query_dsl import create_app
from query_dsl.sources import ShardedSource
from vhms.server import DEFAULT_SERVER_LIMITS, Store, VhmsService

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


def _served_query_api(source: ShardedSource) -> BackgroundServer:
    server = BackgroundServer(create_app(source), "127.0.0.1", 0, name="test-query-api")
    server.start()
    return server


def _query(url: str) -> httpx.Response:
    now = int(time.time() * 1000) // MINUTE * MINUTE
    return httpx.post(
        f"{url}/api/v1/query", json={"query": 'fetch("load", last=10m)', "end": now + MINUTE}, timeout=30
    )


def _store() -> Store:
    store = Store()
    now = int(time.time() * 1000) // MINUTE * MINUTE
    store.ingest(["load{dc=east}"], np.array([1.0]), np.array([now]))
    return store


def test_the_query_api_answers_after_vhms_closed_every_idle_connection(wait: Callable[..., None]) -> None:
    """The first query after a long idle period used to answer 500: its VHMS connection had
    been closed by the server meanwhile. The request is written into the dead socket, the
    answer is an end-of-file, and the call is tried again on a fresh connection."""
    service = VhmsService(
        _store(), http_port=None, limits=dataclasses.replace(DEFAULT_SERVER_LIMITS, idle_timeout=0.5)
    )
    service.start(register=False)
    source = ShardedSource(servers=[(service.host, service.port)])
    api = _served_query_api(source)
    try:
        for round_ in range(1, 4):
            answer = _query(api.url)
            assert answer.status_code == 200, answer.text
            assert [s["labels"]["dc"] for s in answer.json()["series"]] == ["east"]
            wait(
                lambda r=round_: (
                    service.thrift.stats["idle_closed"] >= r and service.thrift.open_connections == 0
                ),
                10,
                "VHMS to close every idle connection",
            )
        assert source.stats["member_failures"] == 0  # no failover: the retry was enough
    finally:
        api.stop()
        source.close()
        service.stop()


def test_the_query_api_reads_vhms_over_tls(tls_files: TlsFiles) -> None:
    service = VhmsService(_store(), http_port=None, ssl_context=server_context(tls_files.server))
    service.start(register=False)
    trusted = ShardedSource(servers=[(service.host, service.port)], ssl_context=client_context(tls_files.ca))
    plain = ShardedSource(servers=[(service.host, service.port)], timeout=5)
    api, plain_api = _served_query_api(trusted), _served_query_api(plain)
    try:
        answer = _query(api.url)
        assert answer.status_code == 200, answer.text
        assert [s["labels"]["dc"] for s in answer.json()["series"]] == ["east"]
        assert _query(plain_api.url).status_code != 200  # a plain client gets no data
        assert service.thrift.stats["tls_failures"] >= 1
    finally:
        api.stop()
        plain_api.stop()
        trusted.close()
        plain.close()
        service.stop()
