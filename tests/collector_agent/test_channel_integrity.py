"""The file channel never delivers a damaged byte as an event: checksums are verified on
take, damaged events set aside and counted; a database SQLite cannot read whole is salvaged;
a channel that cannot start leaves the rest of its agent running."""

from __future__ import annotations

import base64
import json
import os
import random
import sqlite3
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from artimon.stack import agent_properties
from bookkeeper.ground import DirectoryLock
from collector_agent import Agent, BatchSink, ChannelException, Context, Event, FileChannel, register
from collector_agent.channels.file.format import unpack_events


def open_channel(directory: Path, dead_letters: Path, name: str = "fc") -> FileChannel:
    channel = FileChannel(name)
    channel.configure(
        Context(
            {
                "dataDirs": str(directory),
                "minimumRequiredSpace": "1048576",
                "keep-alive": "0",
                "deadLetter.dir": str(dead_letters),
            },
            f"a1.channels.{name}.",
        )
    )
    channel.start()
    return channel


def original(batch: int, index: int, repeat: int = 40) -> Event:
    """A recognisable event: its headers name it, its body repeats its name."""
    name = f"{batch}-{index}"
    return Event({"n": name, "kind": "test"}, (f"<{name}>" * repeat).encode())


def fill(channel: FileChannel, batches: int, per_batch: int, repeat: int = 40) -> dict[str, Event]:
    events = {}
    for b in range(batches):
        batch = [original(b, i, repeat) for i in range(per_batch)]
        with channel.transaction() as tx:
            tx.put_batch(batch)
        events.update((e.headers["n"], e) for e in batch)
    return events


def drain(channel: FileChannel, attempts: int = 1000) -> tuple[list[Event], int]:
    """Take until the channel is empty: the events, and the takes that failed."""
    got: list[Event] = []
    failed = 0
    for _ in range(attempts):
        tx = channel.transaction()
        tx.begin()
        try:
            events = tx.take_batch(100)
            tx.commit()
        except ChannelException:
            failed += 1
            tx.rollback()
            continue
        finally:
            tx.close()
        got.extend(events)
        if not events and channel.size == 0:
            return got, failed
    raise AssertionError(f"the channel did not drain: {channel.size} events left, {failed} failed takes")


def dead_letters(directory: Path, name: str = "fc") -> list[dict[str, object]]:
    path = directory / f"channel-{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_flipped_bytes_are_detected_set_aside_counted_and_the_rest_delivered_intact(tmp_path: Path) -> None:
    data, letters = tmp_path / "channel", tmp_path / "dead"
    channel = open_channel(data, letters)
    events = fill(channel, batches=10, per_batch=50)
    channel.stop()
    image = bytearray((data / "channel.db").read_bytes())
    rng = random.Random(7)
    flipped = rng.sample(sorted(events), 20)
    for name in flipped:  # one bit of each of 20 events' bodies, wherever SQLite put them
        body = events[name].body  # whole, or cut by a page's end: in a half found whole
        part = next(p for p in (body, body[: len(body) // 2], body[len(body) // 2 :]) if p in image)
        image[image.find(part) + rng.randrange(len(part))] ^= 1 << rng.randrange(8)
    (data / "channel.db").write_bytes(bytes(image))
    with sqlite3.connect(data / "channel.db") as check:  # SQLite sees nothing wrong
        assert check.execute("PRAGMA quick_check").fetchone() == ("ok",)

    channel = open_channel(data, letters)
    try:
        got, failed = drain(channel)
        assert failed == 0
        by_name = {e.headers["n"]: e for e in got}
        assert len(got) == len(by_name) == 480 and set(by_name) == set(events) - set(flipped)
        assert all(by_name[n] == events[n] for n in by_name)  # byte for byte
        assert channel.metrics()["EventDamagedCount"] == 20
        records = dead_letters(letters)
        assert len(records) == 20 and {r["reason"] for r in records} == {"checksum mismatch"}
        for record in records:
            stored = base64.b64decode(str(record["stored_base64"]))
            name = json.loads(stored[8 : stored.index(b"}") + 1])["n"]
            assert name in flipped and events[name].body not in stored  # the damaged bytes, kept
    finally:
        channel.stop()
    again = open_channel(data, letters)
    assert again.size == 0  # set aside for good: committed with the take
    again.stop()


@pytest.mark.parametrize("seed", range(6))
def test_random_damage_anywhere_never_delivers_an_altered_event(tmp_path: Path, seed: int) -> None:
    data, letters = tmp_path / "channel", tmp_path / "dead"
    channel = open_channel(data, letters)
    events = fill(channel, batches=12, per_batch=40)
    with channel.transaction() as tx:  # a partly consumed batch: a consumed range on disk
        taken = tx.take_batch(15)
    channel.stop()
    image = bytearray((data / "channel.db").read_bytes())
    rng = random.Random(seed)
    for _ in range(20):  # anywhere: SQLite's pages, headers, events
        image[rng.randrange(len(image))] ^= 1 << rng.randrange(8)
    (data / "channel.db").write_bytes(bytes(image))

    channel = open_channel(data, letters)
    try:
        got, _ = drain(channel)
    finally:
        channel.stop()
    names = [e.headers.get("n") for e in got]
    assert all(name in events and e == events[name] for name, e in zip(names, got, strict=True)), "altered"
    assert not {e.headers["n"] for e in taken} & set(names) or channel.metrics()["ChannelSalvageCount"]


def test_a_database_damaged_while_running_is_salvaged_and_what_it_lost_is_counted(tmp_path: Path) -> None:
    data, letters = tmp_path / "channel", tmp_path / "dead"
    channel = open_channel(data, letters)
    try:
        events = fill(channel, batches=20, per_batch=50, repeat=300)
        channel.checkpoint()  # the batches from the write-ahead log into channel.db
        db = data / "channel.db"
        os.truncate(db, db.stat().st_size // 2)  # under the running channel
        got, failed = drain(channel)
        metrics = channel.metrics()
        assert failed == 1 and metrics["ChannelSalvageCount"] == 1  # the take that met the damage
        assert len(got) >= 400 and all(events[e.headers["n"]] == e for e in got)
        assert len(got) + metrics["EventDamagedCount"] == 1000  # everything delivered or counted
        lost = dead_letters(letters)
        assert {r["reason"] for r in lost} == {"unreadable"}
        assert sum(int(str(r["events"])) for r in lost) == metrics["EventDamagedCount"]
        fill(channel, batches=1, per_batch=5)  # the fresh database takes new events
        assert len(drain(channel)[0]) == 5
    finally:
        channel.stop()


def test_a_database_from_before_checksums_is_still_read(tmp_path: Path) -> None:
    data = tmp_path / "channel"
    data.mkdir()
    legacy = b"".join(
        struct.pack("<II", len(headers), len(body)) + headers + body
        for headers, body in ((b'{"k":"v"}', b"old one"), (b"{}", b"old two"), (b"{}", b"old three"))
    )
    with sqlite3.connect(data / "channel.db") as conn:  # the layout of the first version
        conn.execute(
            "CREATE TABLE batches (seq INTEGER PRIMARY KEY, count INTEGER NOT NULL, data BLOB NOT NULL)"
        )
        conn.execute(
            "CREATE TABLE consumed (seq INTEGER NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL)"
        )
        conn.execute("CREATE INDEX consumed_seq ON consumed (seq)")
        conn.execute("INSERT INTO batches VALUES (1, 3, ?)", (legacy,))
        conn.execute("INSERT INTO consumed VALUES (1, 0, 1)")
    channel = open_channel(data, tmp_path / "dead")
    try:
        fill(channel, batches=1, per_batch=2)  # new rows are checksummed beside the old ones
        got, _ = drain(channel)
        assert [e.body for e in got[:2]] == [b"old two", b"old three"] and len(got) == 4
        assert all(e == original(0, i) for i, e in enumerate(got[2:]))
    finally:
        channel.stop()


def truncated_channel(directory: Path, dead: Path) -> dict[str, Event]:
    channel = open_channel(directory, dead, "a")
    events = fill(channel, batches=20, per_batch=50, repeat=300)  # 100 KB batches, as polls make
    channel.stop()
    db = directory / "channel.db"
    os.truncate(db, db.stat().st_size // 2)
    return events


class RecordingSink(BatchSink):
    """Keeps what it delivers, per sink name, for the test to read."""

    delivered: ClassVar[dict[str, list[Event]]] = {}
    lock: ClassVar[threading.Lock] = threading.Lock()

    def deliver(self, events: list[Event]) -> None:
        with self.lock:
            self.delivered.setdefault(self.name, []).extend(events)


@pytest.fixture
def recording() -> Iterator[dict[str, list[Event]]]:
    register("sink", "recording", f"{__name__}:RecordingSink")
    RecordingSink.delivered.clear()
    yield RecordingSink.delivered
    RecordingSink.delivered.clear()


def two_channels(root: Path) -> str:
    """Two seq sources, each into a file channel of its own drained by a recording sink."""
    seq = {"type": "seq", "maxBackoffSleep": 200}
    file = {"type": "file", "minimumRequiredSpace": 1048576}
    return agent_properties(
        "a1",
        sources={
            "ra": {**seq, "channels": "a", "batchSize": 10, "totalEvents": 100},
            "rb": {**seq, "channels": "b", "batchSize": 50},
        },
        channels={
            "a": {**file, "dataDirs": root / "a", "deadLetter.dir": root / "dead"},
            "b": {**file, "dataDirs": root / "b"},
        },
        sinks={
            "ka": {"type": "recording", "channel": "a", "maxBackoffSleep": 200},
            "kb": {"type": "recording", "channel": "b", "maxBackoffSleep": 200},
        },
    )


def test_a_truncated_database_is_moved_aside_and_salvaged_while_another_channel_flows(
    tmp_path: Path, recording: dict[str, list[Event]], wait: Callable[..., None]
) -> None:
    events = truncated_channel(tmp_path / "a", tmp_path / "dead")
    agent = Agent.from_properties(two_channels(tmp_path), "a1", {})
    agent.start()
    try:
        wait(lambda: len(recording.get("kb", [])) >= 500, timeout=60, what="channel b to flow")
        wait(lambda: agent.channels["a"].size == 0, what="channel a to drain")
        wait(lambda: agent.metrics()["SOURCE.ra"]["EventAcceptedCount"] == 100, what="source ra to finish")
        wait(lambda: len(recording.get("ka", [])) >= 100, what="channel a to flow")
        metrics = agent.metrics()["CHANNEL.a"]
        assert metrics["ChannelSalvageCount"] == 1 and metrics["Unhealthy"] == 0
        salvaged = [e for e in recording["ka"] if "n" in e.headers]
        assert len(salvaged) >= 400, "the intact half was not salvaged"
        assert metrics["EventSalvagedCount"] == len(salvaged) + metrics["EventDamagedCount"]
        assert all(events[e.headers["n"]] == e for e in salvaged)  # intact, byte for byte
        assert sorted(int(e.body) for e in recording["ka"] if "n" not in e.headers) == list(range(100))
        (moved,) = (tmp_path / "a").glob("channel.db.corrupt-*[0-9]")  # and its journal beside it
        assert moved.stat().st_size > 0
    finally:
        agent.stop()


def test_a_channel_that_cannot_start_leaves_the_agent_running_and_starts_when_it_can(
    tmp_path: Path, recording: dict[str, list[Event]], wait: Callable[..., None]
) -> None:
    other = DirectoryLock(tmp_path / "a", "another agent").acquire()
    agent = Agent.from_properties(two_channels(tmp_path), "a1", {})
    agent.start()
    try:
        wait(lambda: len(recording.get("kb", [])) >= 500, timeout=60, what="channel b to flow")
        metrics = agent.metrics()
        assert metrics["CHANNEL.a"]["Unhealthy"] == 1 and agent.channels["a"].state.value == "ERROR"
        wait(lambda: agent.metrics()["SOURCE.ra"]["ChannelWriteFail"] >= 2, what="source ra to back off")
        assert agent.metrics()["SINK.ka"]["ChannelReadFail"] >= 1
        assert "ka" not in recording
        other.release()
        wait(lambda: len(recording.get("ka", [])) == 100, timeout=40, what="channel a to start and flow")
        assert agent.metrics()["CHANNEL.a"]["Unhealthy"] == 0
    finally:
        agent.stop()
        other.release()


@pytest.mark.parametrize("version", [1, 2, 7])
@pytest.mark.parametrize("count", [0, 1, 3])
def test_a_blob_of_any_bytes_gives_one_entry_per_event(version: int, count: int) -> None:
    """Found by tests/fuzz (file_channel): a format-1 blob of no event with bytes in it gave
    one Damaged entry."""
    for blob in (b"", b"\x00", b"\x03\x00\x00\x00\x00\x00\x00\x00abc", bytes(range(40))):
        assert len(unpack_events(blob, count, version)) == count
