from __future__ import annotations

import json
import time
from pathlib import Path

import fastavro
import pytest

from bookkeeper import Bookkeeper
from bookkeeper.ground import LandingWriter, encode_sample_batch, encode_trailer
from collector_agent import Context, Event, MemoryChannel, Status
from collector_agent.sinks.raw import RawSink


def batch_event(n: int) -> Event:
    bk = Bookkeeper(f"app{n}", environ={})
    bk.integer("hits", page=str(n)).set(n)
    bk.double("load").set(n / 10)
    headers = {
        "artimon.round": str(1_700_000_000_000 + n * 60_000),
        "artimon.endpoint": f"10.0.0.{n}:1:u",
        "artimon.agent": "a1",
    }
    return Event(headers, encode_sample_batch(bk.snapshot()))


def sink_with(tmp_path: Path, events: list[Event], **settings: str) -> tuple[RawSink, MemoryChannel]:
    channel = MemoryChannel("c")
    channel.configure(Context({"capacity": "1000", "transactionCapacity": "100"}))
    channel.start()
    with channel.transaction() as tx:
        tx.put_batch(events)
    sink = RawSink("raw")
    sink.configure(
        Context(
            {
                "directory": str(tmp_path / "landing"),
                "batchSize": "4",
                "deadLetter.dir": str(tmp_path / "dead"),
                "deadLetter.maxAttempts": "1",
                **settings,
            }
        )
    )
    sink.channel = channel
    sink.start()
    return sink, channel


def read_all(directory: Path) -> list[dict]:
    records = []
    for path in sorted(directory.glob("*.avro")):
        with open(path, "rb") as data:
            records.extend(fastavro.reader(data))
    return records


def test_batches_land_whole_with_their_round_and_roll_into_avro_files(tmp_path: Path) -> None:
    sink, channel = sink_with(tmp_path, [batch_event(n) for n in range(10)], rollSize="1024")
    while sink.process() is Status.READY:
        pass
    sink.stop()
    landing = tmp_path / "landing"
    assert not list(landing.glob("*.tmp"))
    assert len(list(landing.glob("raw-*.avro"))) >= 2  # rolled by size
    records = read_all(landing)
    assert [r["context"] for r in records] == [f"app{n}" for n in range(10)]
    assert [r["round_ms"] for r in records] == [1_700_000_000_000 + n * 60_000 for n in range(10)]
    assert records[3]["endpoint"] == "10.0.0.3:1:u" and records[3]["agent"] == "a1"
    assert records[3]["names"] == ["hits", "load"]
    assert channel.size == 0 and sink.metrics()["FilesRolledCount"] >= 2


def test_roll_by_age(tmp_path: Path) -> None:
    sink, _ = sink_with(tmp_path, [batch_event(1)], rollInterval="0.05")
    assert sink.process() is Status.READY
    assert list((tmp_path / "landing").glob("*.avro.tmp"))
    time.sleep(0.1)  # age the open file past rollInterval
    sink.process()
    assert list((tmp_path / "landing").glob("*.avro")) and not list((tmp_path / "landing").glob("*.tmp"))
    sink.stop()


def test_a_crash_leaves_committed_blocks_and_cuts_the_partial_one(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    crashed = landing / "raw-1-1.avro.tmp"
    writer = LandingWriter(crashed)
    writer.write_block([batch_event(1).body + encode_trailer(1, "e", "a")])
    writer.write_block([batch_event(2).body + encode_trailer(2, "e", "a")])
    writer.close()
    with open(crashed, "ab") as data:
        data.write(b"\x04\x90\x03half a block")  # the block being written when the process died
    empty = landing / "raw-1-2.avro.tmp"
    empty.write_bytes(b"Obj\x01")
    sink, _ = sink_with(tmp_path, [])
    sink.stop()
    assert [r["round_ms"] for r in read_all(landing)] == [1, 2]
    assert not empty.exists() and not crashed.exists()


def test_a_body_that_is_not_a_sample_batch_goes_to_the_dead_letters(tmp_path: Path) -> None:
    sink, channel = sink_with(tmp_path, [batch_event(1), Event({}, b"not avro at all, not even close")])
    assert sink.process() is Status.BACKOFF  # refused: strike
    assert sink.process() is Status.READY  # diverted, the good one landed
    sink.stop()
    assert [r["context"] for r in read_all(tmp_path / "landing")] == ["app1"]
    (line,) = (tmp_path / "dead" / "raw.jsonl").read_text().splitlines()
    assert json.loads(line)["sink"] == "raw"
    assert channel.size == 0


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="codec"):
        RawSink("r").configure(Context({"directory": "/tmp/x", "codec": "lz4"}))
    with pytest.raises(ValueError, match=r"directory: is required"):
        RawSink("r").configure(Context({}, ""))
