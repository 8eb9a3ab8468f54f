"""What ``artimon up`` adds to its query API's ``/metrics``: the landing files Spark has not
taken yet (and how old the oldest is), and ZooKeeper's ``mntr`` figures, including from a
peer that is down or answers garbage."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from artimon.servers import ZooKeeperServer, free_port
from artimon.stack import LandingBacklog, ZooKeeperMetrics


def values(collector: LandingBacklog | ZooKeeperMetrics) -> dict[str, float]:
    """The collector's exposition, parsed back by prometheus_client: name to value."""
    text = generate_latest(collector).decode()  # type: ignore[arg-type]
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_landing_backlog_counts_closed_files_and_the_oldest_ones_age(tmp_path: Path) -> None:
    assert values(LandingBacklog(tmp_path / "missing")) == {
        "artimon_raw_ingest_landing_files": 0,
        "artimon_raw_ingest_landing_bytes": 0,
        "artimon_raw_ingest_lag_seconds": 0,
    }
    now = time.time()
    for name, size, age in (("a.avro", 100, 600), ("b.avro", 50, 30), ("c.avro.tmp", 999, 3600)):
        (tmp_path / name).write_bytes(b"x" * size)
        os.utime(tmp_path / name, (now - age, now - age))
    got = values(LandingBacklog(tmp_path))
    assert got["artimon_raw_ingest_landing_files"] == 2  # the .tmp is still being written
    assert got["artimon_raw_ingest_landing_bytes"] == 150
    assert 600 <= got["artimon_raw_ingest_lag_seconds"] < 660


def test_zookeeper_mntr_becomes_gauges(zk_server: ZooKeeperServer | None) -> None:
    if zk_server is None:
        pytest.skip("$ARTIMON_ZK names an ensemble whose mntr may not be whitelisted")
    got = values(ZooKeeperMetrics(zk_server.host, zk_server.port))
    assert got["zookeeper_up"] == 1
    assert got["zookeeper_znode_count"] >= 4  # /, /zookeeper, /zookeeper/config, /zookeeper/quota
    assert got["zookeeper_num_alive_connections"] >= 1  # this test's own
    assert "zookeeper_version" not in got  # a text line, left out


@pytest.fixture
def garbage_server() -> Iterator[int]:
    """A peer that answers any request with 4 MB of bytes that are not mntr's lines."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection, contextlib.suppress(OSError):
                connection.sendall(b"zk_\xff\tnan-ish\n" + os.urandom(4 << 20))

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield port
    finally:
        listener.close()


def test_zookeeper_down_or_garbage_is_up_0_or_nothing_readable(garbage_server: int) -> None:
    assert values(ZooKeeperMetrics("127.0.0.1", free_port(), timeout=1)) == {"zookeeper_up": 0}
    started = time.monotonic()
    got = values(ZooKeeperMetrics("127.0.0.1", garbage_server, timeout=5))
    assert time.monotonic() - started < 5  # the answer is read up to its 1 MB bound, not to its end
    assert got["zookeeper_up"] == 1
    assert all(name.isascii() and name.replace("_", "").isalnum() for name in got)
