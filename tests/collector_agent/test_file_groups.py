"""A put into several file channels is kept by all of them or undone by all, whatever
moment a SIGKILL chooses: before, between or after the prepares and the decisions."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from collector_agent import ChannelProcessor, Context, Event, FileChannel
from collector_agent.selectors.replicating import ReplicatingChannelSelector

KILLED_IN_A_GROUP = """
import os, signal, sys
from collector_agent import Context, Event, FileChannel, PutGroup
channels = []
for name, directory in (("a", sys.argv[1]), ("b", sys.argv[2])):
    channel = FileChannel(name)
    channel.configure(Context({"dataDirs": directory, "minimumRequiredSpace": "1048576"}))
    channel.start()
    with channel.transaction() as tx:
        tx.put(Event({}, b"before"))
    channels.append(channel)
group = PutGroup("g1", tuple(channel.durable_id for channel in channels))
a, b = (channel.transaction() for channel in channels)
for tx in (a, b):
    tx.begin()
    tx.put(Event({}, b"grouped"))
steps = [lambda: a.prepare(group), lambda: b.prepare(group), a.decide, b.decide]
for step in steps[: int(sys.argv[3])]:
    step()
os.kill(os.getpid(), signal.SIGKILL)
"""


def open_channel(name: str, directory: Path) -> FileChannel:
    channel = FileChannel(name)
    channel.configure(Context({"dataDirs": str(directory), "minimumRequiredSpace": "1048576"}))
    channel.start()
    return channel


def drain(channel: FileChannel) -> list[bytes]:
    with channel.transaction() as tx:
        return [event.body for event in tx.take_batch(100)]


def marks(directory: Path) -> list[tuple[int, int]]:
    with sqlite3.connect(directory / "channel.db") as conn:
        return conn.execute("SELECT seq, decided FROM groups").fetchall()


@pytest.mark.parametrize(
    ("steps", "kept"),
    [
        pytest.param(0, False, id="killed-before-any-prepare"),
        pytest.param(1, False, id="killed-between-the-prepares"),
        pytest.param(2, False, id="killed-before-any-decision"),
        pytest.param(3, True, id="killed-between-the-decisions"),
        pytest.param(4, True, id="killed-before-the-commits"),
    ],
)
@pytest.mark.parametrize("b_first", [False, True], ids=["a-starts-first", "b-starts-first"])
def test_a_put_into_two_file_channels_is_kept_by_both_or_undone_by_both(
    tmp_path: Path, steps: int, kept: bool, b_first: bool
) -> None:
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_IN_A_GROUP, str(a_dir), str(b_dir), str(steps)], timeout=60
    )
    assert killed.returncode == -9
    order = [("b", b_dir), ("a", a_dir)] if b_first else [("a", a_dir), ("b", b_dir)]
    channels = {name: open_channel(name, directory) for name, directory in order}
    try:
        expected = [b"before", b"grouped"] if kept else [b"before"]
        assert drain(channels["a"]) == expected and drain(channels["b"]) == expected
        undone = [channels[name].metrics()["EventUndoneCount"] for name in ("a", "b")]
        prepared = [steps >= 1, steps >= 2]  # what each had written, and now undoes
        assert undone == ([0, 0] if kept else [int(p) for p in prepared])
    finally:
        for channel in channels.values():
            channel.stop()
    assert marks(a_dir) == [] and marks(b_dir) == []  # consumed with their batches


def test_a_peer_that_cannot_be_read_leaves_the_put_kept(tmp_path: Path) -> None:
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_IN_A_GROUP, str(a_dir), str(b_dir), "2"], timeout=60
    )
    assert killed.returncode == -9
    shutil.rmtree(b_dir)  # the other channel's disk is gone: nothing says whether it decided
    a = open_channel("a", a_dir)
    try:
        assert drain(a) == [b"before", b"grouped"]  # at least once, never lost
        assert a.metrics()["EventUndoneCount"] == 0
    finally:
        a.stop()


def test_the_channel_processor_groups_its_file_channels_and_leaves_no_mark(tmp_path: Path) -> None:
    channels = [open_channel(name, tmp_path / name) for name in ("a", "b")]
    selector = ReplicatingChannelSelector()
    selector.configure(Context({}), {channel.name: channel for channel in channels})
    processor = ChannelProcessor(selector)
    try:
        processor.process_batch([Event({}, b"one"), Event({}, b"two")])
        assert [decided for _, decided in marks(tmp_path / "a")] == [1]  # decided before committed
        assert [drain(channel) for channel in channels] == [[b"one", b"two"]] * 2
        assert marks(tmp_path / "a") == [] and marks(tmp_path / "b") == []
    finally:
        for channel in channels:
            channel.stop()
