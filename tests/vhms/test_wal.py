"""The write-ahead log: records and their checksums, a torn tail cut, a damaged record
skipped and counted, group commit, a failing disk refused rather than acknowledged."""

from __future__ import annotations

import logging
import shutil
import struct
import time
from collections.abc import Callable
from pathlib import Path

import google_crc32c
import numpy as np
import pytest

from bookkeeper.wire import IngestColumns
from vhms import VhmsClient, WalError, WalPolicyError
from vhms.server import Store, VhmsService, WriteAheadLog, replay_wal
from vhms.server.wal import MalformedRecordError, decode_batch, encode_batch

MINUTE = 60_000
NOW = int(time.time() * 1000) // MINUTE * MINUTE
NO_IDS = np.zeros(0, dtype=np.int64)


def _log(store: Store, wal: WriteAheadLog, keys: list[str], values: list[float], at: int) -> None:
    """Admit, log and apply one batch as the service does, and wait for its record."""
    ids, admitted, times = store.admit(keys, np.array(values), np.full(len(keys), at))
    pending = wal.append(store.index.keys_of, ids, admitted, times, NO_IDS, [], NO_IDS)
    store.apply(ids, admitted, times)
    wal.wait(pending)


def _written(tmp_path: Path, batches: list[tuple[list[str], list[float], int]]) -> tuple[Path, list[int]]:
    """A log of ``batches`` in one segment; its path and the offset where each record starts."""
    store, wal = Store(), WriteAheadLog(tmp_path / "wal")
    wal.start()
    offsets = []
    for keys, values, at in batches:
        offsets.append((tmp_path / "wal" / "00000001").stat().st_size if offsets else 0)
        _log(store, wal, keys, values, at)
    wal.close()
    return tmp_path / "wal" / "00000001", offsets


def _values(store: Store) -> dict[str, list[float]]:
    result = store.fetch("", NOW - MINUTE, NOW + MINUTE)
    return dict(zip(result.keys, result.values.tolist(), strict=True))


def test_a_record_round_trips_with_its_checksum_over_length_and_payload() -> None:
    record = encode_batch(
        np.array([0, 1]),
        ["métrique{é=1}", "b{}"],
        np.array([0, 1, 0]),
        np.array([1.5, 2.5, np.nan]),
        np.array([NOW, NOW, NOW - MINUTE]),
        np.array([1]),
        ["texte \x00 ✓"],
        np.array([NOW]),
    )
    magic, length, crc = struct.unpack_from("<4sII", record)
    payload = record[12:]
    assert magic == b"VWAL" and length == len(payload)
    assert crc == google_crc32c.extend(google_crc32c.value(struct.pack("<I", length)), payload)
    batch = decode_batch(payload)
    assert batch.named_ids.tolist() == [0, 1] and batch.named_keys == ["métrique{é=1}", "b{}"]
    assert batch.ids.tolist() == [0, 1, 0] and batch.timestamps.tolist() == [NOW, NOW, NOW - MINUTE]
    np.testing.assert_equal(batch.values, [1.5, 2.5, np.nan])
    assert batch.strings == ["texte \x00 ✓"] and batch.string_ids.tolist() == [1]
    with pytest.raises(MalformedRecordError, match="record kind 9 is unknown"):
        decode_batch(b"\x09" + payload[1:])
    with pytest.raises(MalformedRecordError, match=r"need \d+ bytes"):
        decode_batch(payload[:40])


def test_a_torn_tail_is_cut_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    segment, _ = _written(tmp_path, [(["a{}", "b{}"], [1.0, 2.0], NOW), (["a{}"], [3.0], NOW - MINUTE)])
    whole = segment.stat().st_size
    last = encode_batch(
        np.array([0]), ["c{}"], np.array([0]), np.array([9.0]), np.array([NOW]), NO_IDS, [], NO_IDS
    )
    with open(segment, "ab") as out:
        out.write(last[: len(last) // 2])  # what a crash in the middle of a write leaves
    store = Store()
    with caplog.at_level(logging.WARNING):
        report = replay_wal(store, tmp_path / "wal")
    assert "a torn tail of" in caplog.text
    assert (report.records, report.samples, report.torn_bytes) == (2, 3, len(last) // 2)
    assert report.damaged_records == 0 and report.next_segment == 2
    assert segment.stat().st_size == whole  # cut where the sound records end
    np.testing.assert_equal(_values(store), {"a{}": [3.0, 1.0], "b{}": [np.nan, 2.0]})
    again = replay_wal(Store(), tmp_path / "wal")
    assert (again.records, again.torn_bytes) == (2, 0)


@pytest.mark.parametrize("damage", ["payload", "length", "magic"])
def test_a_damaged_record_in_the_middle_is_reported_counted_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    segment, offsets = _written(
        tmp_path,
        [
            (["a{}", "b{}"], [1.0, 2.0], NOW - MINUTE),  # names a and b
            (["c{}", "a{}"], [3.0, 4.0], NOW - MINUTE),  # names c: its record is the damaged one
            (["a{}", "c{}"], [5.0, 6.0], NOW),
        ],
    )
    raw = bytearray(segment.read_bytes())
    where = {"payload": offsets[1] + 30, "length": offsets[1] + 5, "magic": offsets[1]}[damage]
    raw[where] ^= 0x5A
    segment.write_bytes(bytes(raw))
    store = Store()
    with caplog.at_level(logging.ERROR):
        report = replay_wal(store, tmp_path / "wal")
    assert "damaged bytes at offset" in caplog.text
    assert (report.records, report.damaged_records, report.damaged_bytes) == (2, 1, offsets[2] - offsets[1])
    assert report.samples_of_unknown_series == 1  # c's sample in the third record: its name was lost
    assert report.torn_bytes == 0 and segment.read_bytes() == bytes(raw)  # kept: not a torn tail
    np.testing.assert_equal(_values(store), {"a{}": [1.0, 5.0], "b{}": [2.0, np.nan]})  # nothing misplaced


def test_a_record_that_does_not_decode_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    segment, _ = _written(tmp_path, [(["a{}"], [1.0], NOW)])
    payload = b"\x07" + bytes(15)
    crc = google_crc32c.extend(google_crc32c.value(struct.pack("<I", len(payload))), payload)
    with open(segment, "ab") as out:
        out.write(struct.pack("<4sII", b"VWAL", len(payload), crc) + payload)
    with caplog.at_level(logging.ERROR):
        report = replay_wal(Store(), tmp_path / "wal")
    assert (report.records, report.malformed_records) == (1, 1)
    assert "record kind 7 is unknown" in caplog.text


def test_concurrent_appends_share_one_write_and_one_fsync(tmp_path: Path) -> None:
    store, wal = Store(), WriteAheadLog(tmp_path)
    pending = []
    for i in range(20):  # queued while the writer has not started: one group
        ids, values, times = store.admit([f"m{{i={i}}}"], np.array([float(i)]), np.array([NOW]))
        pending.append(wal.append(store.index.keys_of, ids, values, times, NO_IDS, [], NO_IDS))
    wal.start()
    for item in pending:
        wal.wait(item)
    assert (wal.stats["records"], wal.stats["groups"], wal.stats["fsyncs"]) == (20, 1, 1)
    wal.close()
    assert replay_wal(Store(), tmp_path).samples == 20


def test_a_failing_disk_refuses_the_ingest_and_the_next_segment_takes_over(tmp_path: Path) -> None:
    service = VhmsService(Store(), snapshot_dir=tmp_path, snapshot_every=0, http_port=None)
    service.start(register=False)
    try:
        with VhmsClient(service.host, service.port) as client:
            assert client.ingest(IngestColumns.from_keys(["a{}"], np.array([1.0]), np.array([NOW]))) == (1, 0)
            shutil.rmtree(tmp_path / "wal")
            # the open segment is gone with its directory: a new one cannot be created there
            service.snapshot()  # rotates: the next record needs a new segment file
            with pytest.raises(WalError, match="No such file or directory"):
                client.ingest(IngestColumns.from_keys(["b{}"], np.array([2.0]), np.array([NOW])))
            assert service.wal is not None and service.wal.stats["write_errors"] == 1
            (tmp_path / "wal").mkdir()
            assert client.ingest(IngestColumns.from_keys(["b{}"], np.array([2.0]), np.array([NOW]))) == (1, 0)
            assert service.wal.stats["ingests_failed"] == 1
    finally:
        service.thrift.stop()
        assert service.wal is not None
        service.wal.close()
    report = replay_wal(Store(), tmp_path / "wal")
    assert (report.segments, report.records, report.samples) == (1, 1, 1)


def test_periodic_fsync_answers_once_written_and_syncs_soon_after(
    tmp_path: Path, wait: Callable[..., None]
) -> None:
    store, wal = Store(), WriteAheadLog(tmp_path, fsync="periodic", fsync_period=0.1)
    wal.start()
    _log(store, wal, ["a{}"], [1.0], NOW)
    wait(lambda: wal.stats["fsyncs"] >= 1, timeout=10, what="the periodic fsync")
    wal.close()
    with pytest.raises(WalError, match="closed"):
        _log(store, wal, ["a{}"], [2.0], NOW)
    with pytest.raises(WalPolicyError, match="'sometimes'"):
        WriteAheadLog(tmp_path, fsync="sometimes")
