from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from kazoo.client import KazooClient

from bookkeeper import resolve_zk
from bookkeeper.wire import IngestColumns
from vhms import FetchLimitError, SelectorError, VhmsClient
from vhms.server import Store, VhmsService

MINUTE = 60_000
NOW = int(time.time() * 1000) // MINUTE * MINUTE


@pytest.fixture
def service(tmp_path: Path) -> Iterator[VhmsService]:
    svc = VhmsService(Store(max_series_per_query=50), snapshot_dir=tmp_path / "snap", snapshot_every=0)
    svc.start(register=False)
    yield svc
    svc.stop()


def test_ingest_fetch_series_and_labels_over_thrift(service: VhmsService) -> None:
    keys = [f"disk.used{{host=h{i},volume=/data}}" for i in range(10)]
    with VhmsClient(service.host, service.port) as client:
        columns = IngestColumns.from_keys(
            keys, np.arange(10.0), np.full(10, NOW), ["version{}"], ["1.0"], np.array([NOW])
        )
        assert client.ingest(columns) == (10, 0)
        result = client.fetch("disk.used{host~h[0-2]}", NOW - MINUTE, NOW + MINUTE)
        assert result.keys == keys[:3]
        assert result.values[:, -1].tolist() == [0.0, 1.0, 2.0] and np.isnan(result.values[:, 0]).all()
        assert result.step_ms == MINUTE
        assert client.series("disk.used{host=h9}") == [keys[9]]
        assert client.label_names() == ["host", "volume"]
        assert client.label_values("volume") == ["/data"]
    assert service.store.last_strings("version") == {"version{}": (NOW, "1.0")}
    with VhmsClient(service.host, service.port) as client:
        assert client.strings("version") == {"version{}": (NOW, "1.0")}
        assert client.strings("disk.used") == {}  # numbers have no text


def test_errors_travel_as_their_kind(service: VhmsService) -> None:
    with VhmsClient(service.host, service.port) as client:
        with pytest.raises(SelectorError, match="column"):
            client.fetch("x{oops", NOW, NOW + MINUTE)
        client.ingest(
            IngestColumns.from_keys([f"m{{i={i}}}" for i in range(60)], np.ones(60), np.full(60, NOW))
        )
        with pytest.raises(FetchLimitError, match="max_series_per_query=50"):
            client.fetch("m", NOW, NOW + MINUTE)
        assert client.series("m{i=1}") == ["m{i=1}"]  # the connection still works


def test_garbage_closes_only_its_connection(service: VhmsService) -> None:
    with socket.create_connection((service.host, service.port), timeout=5) as sock:
        sock.sendall(b"\x00\x00\x00\x08garbage!")
        with contextlib.suppress(ConnectionResetError):  # a reset is a hang-up too
            assert sock.recv(10) == b""
    with VhmsClient(service.host, service.port) as client:
        assert client.label_names() == []


def test_http_health_and_stats(tmp_path: Path) -> None:
    svc = VhmsService(Store(), shard="s1", http_port=0)
    svc.start(register=False)
    try:
        assert httpx.get(f"{svc.http.url}/health", timeout=10).json() == {
            "status": "ok",
            "shard": "s1",
            "series": 0,
        }
        stats = httpx.get(f"{svc.http.url}/stats", timeout=10).json()
        assert stats["resolutions"][0] == "60s:60:last" and stats["series"] == 0
    finally:
        svc.stop()


def test_snapshot_on_stop_and_restore_on_start(tmp_path: Path) -> None:
    first = VhmsService(Store(), snapshot_dir=tmp_path, snapshot_every=0, http_port=None)
    first.start(register=False)
    with VhmsClient(first.host, first.port) as client:
        client.ingest(IngestColumns.from_keys(["a{}"], np.array([4.0]), np.array([NOW])))
    first.stop()
    second = VhmsService(Store(), snapshot_dir=tmp_path, snapshot_every=0, http_port=None)
    second.start(register=False)
    try:
        with VhmsClient(second.host, second.port) as client:
            assert client.fetch("a", NOW, NOW + MINUTE).values.tolist() == [[4.0]]
    finally:
        second.stop()


def test_registers_its_shard_in_zookeeper(zk_hosts: str, wait: Callable[..., None]) -> None:
    svc = VhmsService(Store(), shard="east", http_port=None)
    svc.start(zk_hosts, session_timeout=2.0)
    connect, layout = resolve_zk(zk_hosts)
    client = KazooClient(hosts=connect)
    client.start(timeout=30)
    try:
        wait(
            lambda: (
                client.exists(layout.vhms_shard("east")) and client.get_children(layout.vhms_shard("east"))
            )
        )
        assert client.get_children(layout.vhms_shard("east")) == [f"127.0.0.1:{svc.port}"]
        svc.stop()
        assert client.get_children(layout.vhms_shard("east")) == []
    finally:
        client.stop()
        client.close()
