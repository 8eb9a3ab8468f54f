from __future__ import annotations

import io
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest

from artimon.servers import VhmsShard
from bookkeeper.wire import IngestColumns
from vhms import CatchingUpError, ShardedClient, SnapshotError, VhmsClient, VhmsError
from vhms.server import CatchUp, Store, VhmsService
from vhms.server.catchup import MAX_CHUNK_BYTES, merge_chunk, pull, read_chunk

RESOLUTIONS = "1s:120,10s:30:max"
NOW = int(time.time() * 1000) // 10_000 * 10_000
KEYS = [f"cpu.load{{host=h{i:03d}}}" for i in range(120)]
LATE_KEYS = [f"disk.free{{host=h{i:03d}}}" for i in range(40)]  # only while a replica is down


def columns(keys: list[str], ts: int, offset: float, text: str | None = None) -> IngestColumns:
    values = np.arange(len(keys), dtype=np.float64) + offset
    strings = (["version{}"], [text], np.array([ts])) if text else ([], [], np.zeros(0, dtype=np.int64))
    return IngestColumns.from_keys(keys, values, np.full(len(keys), ts), *strings)


def store_of(*batches: IngestColumns) -> Store:
    store = Store(RESOLUTIONS)
    for batch in batches:
        store.ingest_columns(batch)
    return store


def answers(client: VhmsClient | ShardedClient | Store) -> dict[str, np.ndarray]:
    """Every series' buckets of every ring, by resolution and key."""
    out = {}
    for step in (1, 10):
        result = client.fetch("{__name__~.+}", NOW - 300_000, NOW + 120_000, step)
        for key, row in zip(result.keys, result.values, strict=True):
            out[f"{step}s {key}"] = row
    return out


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)


def filled(buckets: dict[str, np.ndarray]) -> int:
    return sum(int((~np.isnan(row)).sum()) for row in buckets.values())


def test_merge_keeps_the_later_sample_of_a_bucket_whichever_came_first() -> None:
    early, late = columns(KEYS, NOW + 100, 1.0), columns(KEYS, NOW + 900, 2.0)
    for local, peer in ((store_of(late), store_of(early)), (store_of(early), store_of(late))):
        data, following, total = read_chunk(peer, 0, MAX_CHUNK_BYTES)
        assert (following, total) == (len(KEYS), len(KEYS))
        assert merge_chunk(local, data, 0) == len(KEYS)
        assert same(answers(local), answers(store_of(early, late)))


def test_merge_fills_what_the_replica_missed_and_keeps_its_own() -> None:
    missed = [columns(KEYS, NOW - 60_000 + i * 1000, i) for i in range(20)]
    live = [columns(KEYS + LATE_KEYS, NOW - 40_000 + i * 1000, 100 + i, f"v{i}") for i in range(5)]
    peer, local = store_of(*missed, *live), store_of(*live)
    first = 0
    while first < peer.series:  # small chunks: several calls
        data, following, _ = read_chunk(peer, first, 60 * 1024)
        assert following > first
        merge_chunk(local, data, first)
        first = following
    assert local.stats["catchup_series"] == peer.series
    assert same(answers(local), answers(peer)) and filled(answers(local)) > 20 * len(KEYS)
    assert (
        local.last_strings("version") == peer.last_strings("version") == {"version{}": (NOW - 36_000, "v4")}
    )


def test_chunks_are_bounded_and_garbage_is_refused() -> None:
    store = store_of(columns(KEYS, NOW, 1.0))
    _, following, _ = read_chunk(store, 0, 1)
    assert following == 1  # one series at least
    _, following, _ = read_chunk(store, 5, 1 << 40)
    assert following == len(KEYS)  # capped at MAX_CHUNK_BYTES: all 120 fit
    with pytest.raises(ValueError):
        read_chunk(store, -1, 1000)
    good, _, _ = read_chunk(store, 0, 1 << 20)
    wrong_shape = io.BytesIO()
    np.savez(wrong_shape, **{"ring0.head": np.array([1]), "ring0.values": np.zeros((3, 3))})
    for garbage in (b"", b"garbage" * 100, good[: len(good) // 2], wrong_shape.getvalue()):
        with pytest.raises(SnapshotError):
            merge_chunk(Store(RESOLUTIONS), garbage, 0)


def test_a_silent_peer_times_out_and_the_next_one_is_read() -> None:
    peer = VhmsService(store_of(columns(KEYS, NOW, 1.0)), http_port=None)
    peer.start(register=False)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    try:
        local = Store(RESOLUTIONS)
        started = time.monotonic()
        source = pull(
            local,
            [silent.getsockname(), (peer.host, peer.port)],
            chunk_bytes=1 << 16,
            timeout=1.0,
            ssl_context=None,
            stop=threading.Event(),
        )
        assert source == (peer.host, peer.port) and time.monotonic() - started < 30
        assert local.stats["catchup_peer_failures"] == 1 and local.series == len(KEYS)
        with VhmsClient(peer.host, peer.port, timeout=10) as client, pytest.raises(VhmsError, match="chunk"):
            client.catch_up_chunk(-5, 100)
    finally:
        silent.close()
        peer.stop()


def test_a_chunk_over_the_frame_limit_is_refused_not_read() -> None:
    wide = Store("1s:300000")  # one series: 2.4 MB of ring data, over 2 * 1 + 1 MiB
    wide.ingest_columns(columns(KEYS[:1], NOW, 1.0))
    peer = VhmsService(wide, http_port=None)
    peer.start(register=False)
    try:
        local = Store("1s:300000")
        args = {"timeout": 10.0, "ssl_context": None, "stop": threading.Event()}
        assert pull(local, [(peer.host, peer.port)], chunk_bytes=1, **args) is None
        assert local.stats["catchup_peer_failures"] == 1 and local.series == 0
        assert pull(local, [(peer.host, peer.port)], chunk_bytes=2 << 20, **args) == (peer.host, peer.port)
        assert local.series == 1
    finally:
        peer.stop()


def test_the_command_refuses_a_peer_ca_without_a_certificate() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "artimon", "vhms", "--no-register", "--catch-up", "--tls-peer-ca", "ca.pem"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and "need --tls-cert" in refused.stderr


def _member(path: Path, zk_hosts: str, delay: float) -> VhmsService:
    service = VhmsService(Store(RESOLUTIONS), shard="s0", snapshot_dir=path, snapshot_every=0)
    service.start(
        zk_hosts, session_timeout=3.0, catch_up=CatchUp(delay=delay, timeout=20, chunk_bytes=64 * 1024)
    )
    return service


def _round(writer: ShardedClient, keys: list[str], i: int) -> None:
    stored, refused = writer.ingest(columns(keys, NOW - 60_000 + i * 1000, i, f"v{i}"))
    assert (stored, refused) == (len(keys), 0)


def test_a_replica_restarted_empty_catches_up(
    tmp_path: Path, zk_hosts: str, wait: Callable[..., None]
) -> None:
    a = _member(tmp_path / "a", zk_hosts, 0.0)
    wait(a.caught_up.is_set, timeout=60)
    b = _member(tmp_path / "b", zk_hosts, 0.0)
    writer = ShardedClient(zk_hosts, member_backoff=0.5, name="test-writer")
    try:
        wait(lambda: len(writer.shards.get("s0", [])) == 2 and b.caught_up.is_set(), timeout=60)
        for i in range(10):
            _round(writer, KEYS, i)
        assert same(answers(a.store), answers(b.store))
        b.stop()
        wait(lambda: len(writer.shards.get("s0", [])) == 1, timeout=60)
        for i in range(10, 30):  # missed by b
            _round(writer, KEYS + LATE_KEYS, i)
        b = _member(tmp_path / "b-empty", zk_hosts, 15.0)  # long: the reads below happen within it
        assert not b.caught_up.is_set()
        assert b.http is not None and "catching up" in _health(b)
        wait(lambda: len(writer.shards.get("s0", [])) == 2, timeout=60)
        for i in range(30, 35):  # live while b catches up: b stores them before it reads a
            _round(writer, KEYS + LATE_KEYS, i)
        b_first = ShardedClient(servers={"s0": [(b.host, b.port), (a.host, a.port)]}, name="b-first")
        with b_first:
            assert not b.caught_up.is_set()  # the delay is not over: these reads happen while b catches up
            assert same(answers(b_first), answers(a.store))
            assert b_first.stats["catching_up_skips"] == 2 and b_first.stats["member_failures"] == 0
        with VhmsClient(b.host, b.port, timeout=10) as direct, pytest.raises(CatchingUpError):
            direct.series("cpu.load")
        wait(b.caught_up.is_set, timeout=120)
        assert b.caught_up_from == (a.host, a.port) and "ok" in _health(b)
        assert b.store.stats["catchup_chunks"] > 1
        for i in range(35, 40):
            _round(writer, KEYS + LATE_KEYS, i)
        on_a, on_b = answers(a.store), answers(b.store)
        assert same(on_a, on_b)
        expected = 40 * len(KEYS) + 30 * len(LATE_KEYS)  # finest buckets
        assert sum(int((~np.isnan(v)).sum()) for k, v in on_b.items() if k.startswith("1s ")) == expected
        assert b.store.last_strings("version") == {"version{}": (NOW - 21_000, "v39")}
    finally:
        writer.close()
        b.stop()
        a.stop()


def _health(service: VhmsService) -> str:
    assert service.http is not None
    answer = httpx.get(f"{service.http.url}/health", timeout=10)
    assert answer.status_code == (200 if service.caught_up.is_set() else 503)
    stats = httpx.get(f"{service.http.url}/stats", timeout=10).json()
    assert stats["catching_up"] is not service.caught_up.is_set()
    return answer.json()["status"]


def test_a_member_process_killed_and_restarted_empty_is_ready_once_caught_up(
    tmp_path: Path, zk_hosts: str, wait: Callable[..., None]
) -> None:
    a = VhmsShard(tmp_path / "a", "s0", zk_hosts, resolutions=RESOLUTIONS)
    b = VhmsShard(tmp_path / "b", "s0", zk_hosts, resolutions=RESOLUTIONS)
    writer = ShardedClient(zk_hosts, member_backoff=0.5, name="test-writer")
    try:
        with a, b:
            wait(lambda: len(writer.shards.get("s0", [])) == 2, timeout=60)
            for i in range(10):
                _round(writer, KEYS, i)
            assert b.kill() > 0
            for i in range(10, 30):  # b misses them (or, before its session ends, fails them)
                _round(writer, KEYS + LATE_KEYS, i)
            shutil.rmtree(tmp_path / "b" / "s0")  # its disk lost
            b.start()  # ready (/health 200) once caught up
            with (
                VhmsClient(a.address, a.port, timeout=30) as on_a,
                VhmsClient(b.address, b.port, timeout=30) as on_b,
            ):
                from_a, from_b = answers(on_a), answers(on_b)
            assert same(from_a, from_b)
            finest = sum(int((~np.isnan(v)).sum()) for k, v in from_b.items() if k.startswith("1s "))
            assert finest == 30 * len(KEYS) + 20 * len(LATE_KEYS)
    finally:
        writer.close()
