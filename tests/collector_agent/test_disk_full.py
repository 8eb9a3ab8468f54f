"""A file channel on a disk that fills up, then frees: puts that cannot be made durable fail
before anything is handed on, and a take whose commit cannot be recorded is not delivered
twice. On a real small filesystem: a tmpfs of a few MiB mounted for the test."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector_agent import BatchSink, ChannelFullException, Context, Event, FileChannel, Status


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB tmpfs, unmounted at the end; skipped where mounting is not permitted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError as exc:
        pytest.skip(f"cannot run mount: {exc}")
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30)


def fill_up(path: Path) -> None:
    """Write ``path`` until the disk refuses (as another process filling the disk would)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 512)
    finally:
        os.close(fd)


class Downstream(BatchSink):
    """The next hop: keeps every event it is handed."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.received: list[bytes] = []

    def deliver(self, events: list[Event]) -> None:
        self.received.extend(e.body for e in events)


def open_channel(directory: Path) -> FileChannel:
    channel = FileChannel("full")
    channel.configure(
        Context(
            {"dataDirs": str(directory), "minimumRequiredSpace": "1048576", "keep-alive": "0"},
            "a1.channels.full.",
        )
    )
    channel.start()
    return channel


def put(channel: FileChannel, start: int, count: int) -> None:
    with channel.transaction() as tx:
        tx.put_batch([Event({}, f"{n:08d}".encode() * 128) for n in range(start, start + count)])


def drain(sink: Downstream, channel: FileChannel) -> None:
    for _ in range(10_000):
        if sink.process() is Status.BACKOFF and channel.size == 0:
            return
    raise AssertionError(f"{channel.size} events left in the channel")


def test_a_full_disk_neither_loses_nor_duplicates(small_disk: Path) -> None:
    channel = open_channel(small_disk / "channel")
    sink = Downstream("next")
    sink.configure(Context({"batchSize": "100"}, "a1.sinks.next."))
    sink.channel = channel
    sink.start()
    try:
        for start in range(0, 2000, 100):  # 2,000 acknowledged events, about 2 MiB
            put(channel, start, 100)
        fill_up(small_disk / "filler")
        assert os.statvfs(small_disk).f_bavail == 0

        # a put that cannot be made durable fails, and nothing of it is visible
        with pytest.raises(ChannelFullException):
            put(channel, 2000, 100)
        assert channel.size == 2000

        # every take commit fails to be recorded: the events are delivered once all the same
        drain(sink, channel)
        assert channel.metrics()["UnrecordedTakeCount"] == 2000
        assert len(sink.received) == len(set(sink.received)) == 2000

        (small_disk / "filler").unlink()
        for start in range(2000, 2500, 100):  # the source's retry, and more
            put(channel, start, 100)
        drain(sink, channel)
        assert channel.metrics()["UnrecordedTakeCount"] == 0  # recorded with the next commits
    finally:
        sink.stop()
        channel.stop()
    assert sorted(sink.received) == [f"{n:08d}".encode() * 128 for n in range(2500)]
    again = open_channel(small_disk / "channel")
    try:
        assert again.size == 0  # nothing delivered comes back
    finally:
        again.stop()
