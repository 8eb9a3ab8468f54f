from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from collector_agent import ChannelException, ChannelFullException, Context, Event, FileChannel


def open_channel(directory: Path, **settings: str) -> FileChannel:
    channel = FileChannel("fc")
    channel.configure(
        Context(
            {"dataDirs": str(directory), "minimumRequiredSpace": "1048576", "keep-alive": "0", **settings},
            "a1.channels.fc.",
        )
    )
    channel.start()
    return channel


def put(channel: FileChannel, bodies: list[bytes], headers: dict[str, str] | None = None) -> None:
    with channel.transaction() as tx:
        tx.put_batch([Event(dict(headers or {}), b) for b in bodies])


def take_all(channel: FileChannel) -> list[Event]:
    with channel.transaction() as tx:
        return tx.take_batch(100_000)


def test_committed_events_survive_a_restart_with_headers_and_bytes(tmp_path: Path) -> None:
    channel = open_channel(tmp_path)
    put(channel, [b"\x00\xffbinary", b"two"], {"k": "v", "\u00e9": "\u00fc"})
    channel.stop()
    again = open_channel(tmp_path)
    got = take_all(again)
    assert [e.body for e in got] == [b"\x00\xffbinary", b"two"]
    assert got[0].headers == {"k": "v", "\u00e9": "\u00fc"}
    again.stop()


CRASHING_PROCESS = """
import os, sys
from collector_agent import Context, Event, FileChannel
channel = FileChannel("fc")
channel.configure(Context({"dataDirs": sys.argv[1], "minimumRequiredSpace": "1048576"}))
channel.start()
with channel.transaction() as tx:
    tx.put_batch([Event({}, b"a"), Event({}, b"b")])
tx = channel.transaction()
tx.begin()
tx.put(Event({}, b"prepared"))
tx.prepare()
os._exit(1)  # dies here: no stop, no commit
"""


def test_a_process_dying_mid_transaction_leaves_committed_and_prepared_events(tmp_path: Path) -> None:
    died = subprocess.run([sys.executable, "-c", CRASHING_PROCESS, str(tmp_path)], timeout=60)
    assert died.returncode == 1
    after = open_channel(tmp_path)
    # a prepared (durably written) put replays: at least once, never lost
    assert sorted(e.body for e in take_all(after)) == [b"a", b"b", b"prepared"]
    after.stop()


def test_a_directory_serves_one_channel_at_a_time(tmp_path: Path) -> None:
    first = open_channel(tmp_path)
    with pytest.raises(ChannelException, match=rf"in use by pid {os.getpid()} \(file channel fc\)"):
        open_channel(tmp_path)
    first.stop()
    open_channel(tmp_path).stop()


def test_taken_and_committed_events_are_gone_after_restart(tmp_path: Path) -> None:
    channel = open_channel(tmp_path)
    put(channel, [str(i).encode() for i in range(10)])
    with channel.transaction() as tx:
        assert len(tx.take_batch(4)) == 4
    tx = channel.transaction()
    tx.begin()
    tx.take_batch(3)
    tx.rollback()
    tx.close()
    channel.stop()
    again = open_channel(tmp_path)
    assert [e.body for e in take_all(again)] == [str(i).encode() for i in range(4, 10)]
    again.stop()


def test_rollback_of_a_prepared_put_undoes_it(tmp_path: Path) -> None:
    channel = open_channel(tmp_path)
    tx = channel.transaction()
    tx.begin()
    tx.put(Event({}, b"x"))
    tx.prepare()
    tx.rollback()
    tx.close()
    channel.stop()
    again = open_channel(tmp_path)
    assert again.size == 0
    again.stop()


def test_capacity_and_transaction_capacity(tmp_path: Path) -> None:
    channel = open_channel(tmp_path, capacity="5", transactionCapacity="3")
    with pytest.raises(ChannelException, match="transactionCapacity 3"):
        put(channel, [b"x"] * 4)
    put(channel, [b"x"] * 3)
    with pytest.raises(ChannelFullException, match="3 of 5"):
        put(channel, [b"x"] * 3)
    assert channel.size == 3
    channel.stop()


def test_minimum_required_space_refuses_puts(tmp_path: Path) -> None:
    channel = open_channel(tmp_path, minimumRequiredSpace=str(2**62))
    with pytest.raises(ChannelFullException, match="would leave less than minimumRequiredSpace"):
        put(channel, [b"x"])
    assert channel.metrics()["EventPutErrorCount"] == 1
    channel.stop()


def test_concurrent_committers_share_fsyncs(tmp_path: Path) -> None:
    channel = open_channel(tmp_path, capacity="100000", transactionCapacity="100")
    barrier = threading.Barrier(8)

    def committer(k: int) -> None:
        barrier.wait()
        for i in range(25):
            put(channel, [f"{k}-{i}".encode()])

    threads = [threading.Thread(target=committer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert channel.size == 200
    # 200 transaction commits; with group commit they share SQLite commits (and fsyncs)
    assert channel.sqlite_commits < 200
    channel.stop()


def test_operations_on_a_stopped_channel_fail_clearly(tmp_path: Path) -> None:
    channel = open_channel(tmp_path)
    channel.stop()
    with pytest.raises(ChannelException, match="stopped"):
        put(channel, [b"x"])


def test_a_channel_file_that_is_not_a_database_is_moved_aside_and_replaced(tmp_path: Path) -> None:
    (tmp_path / "channel.db").write_bytes(b"this is not sqlite" * 100)
    channel = open_channel(tmp_path)
    try:
        assert channel.size == 0 and channel.metrics()["ChannelSalvageCount"] == 1
        (moved,) = tmp_path.glob("channel.db.corrupt-*")
        assert moved.read_bytes() == b"this is not sqlite" * 100
        put(channel, [b"fresh"])
        assert [e.body for e in take_all(channel)] == [b"fresh"]
    finally:
        channel.stop()


def test_concurrent_takers_splitting_batches_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    channel = open_channel(tmp_path, capacity="100000", transactionCapacity="1000")
    for start in range(0, 3000, 300):
        put(channel, [str(i).encode() for i in range(start, start + 300)])
    received: list[int] = []
    lock = threading.Lock()

    def taker(size: int) -> None:
        rollbacks = 0
        while True:
            tx = channel.transaction()
            tx.begin()
            events = tx.take_batch(size)
            if size == 7 and events and int(events[0].body) % 2 and rollbacks < 50:
                rollbacks += 1
                tx.rollback()  # some takes change their mind: their events come back
                tx.close()
                continue
            tx.commit()
            tx.close()
            if not events:
                return
            with lock:
                received.extend(int(e.body) for e in events)

    threads = [threading.Thread(target=taker, args=(size,)) for size in (7, 64, 250)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(received) == list(range(3000))
    channel.stop()
    again = open_channel(tmp_path)
    assert again.size == 0
    again.stop()
