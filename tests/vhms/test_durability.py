"""A crash of VHMS loses nothing it acknowledged: ``artimon vhms`` in a process of its own,
killed with SIGKILL right after acknowledged ingests, several times in a row, and restarted
on the same data directory; and the write-ahead log's segments go once a snapshot holds
them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from artimon.testing import start_ready_process
from bookkeeper.wire import IngestColumns
from vhms import VhmsClient
from vhms.server import Store, VhmsService

MINUTE = 60_000
NOW = int(time.time() * 1000) // MINUTE * MINUTE
ROUNDS = 4
SERIES_PER_ROUND = 1_500
BATCH = 400


class Shard:
    """``artimon vhms`` on ``data``, restarted and killed by the test."""

    def __init__(self, data: Path, options: list[str]) -> None:
        self.data = data
        self.options = options
        self.process: subprocess.Popen[str] | None = None
        self.address = ("", 0)
        self.ready = ""

    def start(self) -> None:
        command = [sys.executable, "-m", "artimon", "vhms", "--no-register", "--http-port", "0"]
        command += ["--data-dir", str(self.data), *self.options]
        self.process, self.ready = start_ready_process(command, self.data.parent / "vhms.log", "serving")
        found = re.search(r" on ([\d.]+):(\d+)", self.ready)
        assert found, self.ready
        self.address = (found.group(1), int(found.group(2)))

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self._close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=60)
        self._close()

    def _close(self) -> None:
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def shard_factory(tmp_path: Path) -> Iterator[list[Shard]]:
    shards: list[Shard] = []
    yield shards
    for shard in shards:
        shard.stop()


def _round(number: int) -> tuple[list[IngestColumns], dict[tuple[str, int], float]]:
    """Round ``number``: every series so far and ``SERIES_PER_ROUND`` new ones, at a minute
    of their own, in batches; and a STRING series."""
    at = NOW - (ROUNDS + 2 - number) * MINUTE
    keys = [
        f"durable.metric{{i={i},round=r{i // SERIES_PER_ROUND}}}"
        for i in range((number + 1) * SERIES_PER_ROUND)
    ]
    values = np.arange(len(keys), dtype=np.float64) * 10 + number
    batches = [
        IngestColumns.from_keys(
            keys[first : first + BATCH],
            values[first : first + BATCH],
            np.full(len(keys[first : first + BATCH]), at),
            [f"durable.version{{round=r{number}}}"],
            [f"v{number} ✓"],
            np.array([at]),
        )
        for first in range(0, len(keys), BATCH)
    ]
    expected = {(key, at): float(value) for key, value in zip(keys, values.tolist(), strict=True)}
    return batches, expected


def _held(client: VhmsClient) -> dict[tuple[str, int], float]:
    result = client.fetch("durable.metric", NOW - 30 * MINUTE, NOW + MINUTE, 60)
    rows, columns = np.nonzero(~np.isnan(result.values))
    keys = result.keys
    return {
        (keys[row], int(result.timestamps[column])): float(result.values[row, column])
        for row, column in zip(rows.tolist(), columns.tolist(), strict=True)
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [
        pytest.param(["--snapshot-every", "3600"], id="log-only"),
        pytest.param(["--snapshot-every", "0.2", "--wal-fsync", "periodic"], id="snapshots-racing-periodic"),
    ],
)
def test_kill_9_right_after_acknowledged_ingests_loses_none_of_them(
    tmp_path: Path, shard_factory: list[Shard], options: list[str]
) -> None:
    shard = Shard(tmp_path / "vhms", options)
    shard_factory.append(shard)
    acknowledged: dict[tuple[str, int], float] = {}
    for number in range(ROUNDS):
        shard.start()
        with VhmsClient(*shard.address) as client:
            held = _held(client)
            assert held == acknowledged, f"start {number}: {len(held)} of {len(acknowledged)} samples"
            assert client.series("durable.version") == [
                f"durable.version{{round=r{n}}}" for n in range(number)
            ]
            batches, expected = _round(number)
            for batch in batches:
                assert client.ingest(batch) == (len(batch.name_ids), 0)
        acknowledged |= expected
        shard.kill()  # at once: nothing after the last acknowledgement
    shard.start()
    with VhmsClient(*shard.address) as client:
        assert _held(client) == acknowledged
        assert len(acknowledged) == sum((n + 1) * SERIES_PER_ROUND for n in range(ROUNDS))


def test_a_snapshot_truncates_the_log_and_a_restart_replays_what_followed(tmp_path: Path) -> None:
    wal = tmp_path / "wal"
    first = VhmsService(Store(), snapshot_dir=tmp_path, snapshot_every=0, http_port=None)
    first.start(register=False)
    with VhmsClient(first.host, first.port) as client:
        for minute in range(3):
            client.ingest(
                IngestColumns.from_keys(
                    ["a{}", "b{}"], np.array([1.0, 2.0]) + minute, np.full(2, NOW - minute * MINUTE)
                )
            )
        assert [p.name for p in sorted(wal.iterdir())] == ["00000001"]
        before_snapshot = (wal / "00000001").read_bytes()
        first.snapshot()
        assert list(wal.iterdir()) == []  # the snapshot holds its three records
        client.ingest(IngestColumns.from_keys(["a{}", "c{}"], np.array([7.0, 8.0]), np.full(2, NOW + MINUTE)))
    assert [p.name for p in sorted(wal.iterdir())] == ["00000002"]
    assert first.wal is not None and first.wal.stats["segments_deleted"] == 1
    first.thrift.stop()  # a crash: no shutdown snapshot
    first.wal.close()
    first._dir_lock.release()  # the crash ends the process that held the directory
    expected = {
        "a{}": [3.0, 2.0, 1.0, 7.0],
        "b{}": [4.0, 3.0, 2.0, np.nan],
        "c{}": [np.nan, np.nan, np.nan, 8.0],
    }

    def held(service: VhmsService) -> dict[str, list[float]]:
        result = service.store.fetch("", NOW - 2 * MINUTE, NOW + 2 * MINUTE)
        return dict(zip(result.keys, result.values.tolist(), strict=True))

    second = VhmsService(Store(), snapshot_dir=tmp_path, snapshot_every=0, http_port=None)
    assert second.replayed is not None
    assert (second.replayed.segments, second.replayed.records, second.replayed.samples) == (1, 1, 2)
    np.testing.assert_equal(held(second), expected)
    assert second.wal is not None
    second.thrift.stop()  # never started: its listening socket
    second.wal.close()
    second._dir_lock.release()

    # a crash between the snapshot's manifest and the deletion of the segments it holds:
    # the manifest names the first segment it does not hold, the older ones are skipped
    (wal / "00000001").write_bytes(before_snapshot)
    third = VhmsService(Store(), snapshot_dir=tmp_path, snapshot_every=0, http_port=None)
    assert third.replayed is not None
    assert (third.replayed.segments_skipped, third.replayed.segments, third.replayed.records) == (1, 1, 1)
    np.testing.assert_equal(held(third), expected)
    third.start(register=False)
    third.stop()  # the shutdown snapshot holds everything: no segment left
    assert list(wal.iterdir()) == []
    manifest = json.loads((tmp_path / "vhms-snapshot.json").read_text())
    assert manifest["wal_from"] == 3  # segment numbers only grow, even with none left
    fourth = VhmsService(Store(), snapshot_dir=tmp_path, snapshot_every=0, http_port=None)
    assert fourth.replayed is not None and fourth.replayed.next_segment == 3
    np.testing.assert_equal(held(fourth), expected)
    fourth.thrift.stop()
