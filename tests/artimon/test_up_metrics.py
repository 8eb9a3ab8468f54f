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

from artimon.servers import ZooKeeperServer, four_letter_word, free_port
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


GARBAGE = b"zk_\xff\tnan-ish\nzk_size 12\n" + bytes(range(256)).replace(b"\t", b" ") * (16 << 10)  # 4 MiB


@pytest.fixture
def garbage_server() -> Iterator[int]:
    """A peer that answers any four-letter word with 4 MiB of bytes that are not mntr's lines.
    It reads the word before answering, as ZooKeeper does: a socket closed with unread bytes
    sends a reset, which would throw away what the client had not read yet (seen under load)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def answer(connection: socket.socket) -> None:
        connection.settimeout(30)
        word = b""
        while len(word) < 4 and (chunk := connection.recv(4 - len(word))):
            word += chunk
        connection.sendall(GARBAGE)  # the client hangs up after its 1 MiB bound: a reset, ignored
        connection.shutdown(socket.SHUT_WR)

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection, contextlib.suppress(OSError):
                answer(connection)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield port
    finally:
        listener.close()


def test_zookeeper_down_or_garbage_is_up_0_and_nothing_else(garbage_server: int) -> None:
    assert values(ZooKeeperMetrics("127.0.0.1", free_port(), timeout=1)) == {"zookeeper_up": 0}
    started = time.monotonic()
    answer = four_letter_word("127.0.0.1", garbage_server, "mntr", timeout=5)
    assert time.monotonic() - started < 5  # the answer is read up to its 1 MiB bound, not to its end
    assert answer.startswith("zk_\ufffd\tnan-ish\n") and len(answer.encode()) >= 1 << 20
    assert values(ZooKeeperMetrics("127.0.0.1", garbage_server, timeout=5)) == {"zookeeper_up": 0}
