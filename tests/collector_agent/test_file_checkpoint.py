"""The file channel commits into SQLite's write-ahead log (one fsync a commit) and copies the
log into ``channel.db`` beside the committers: what the checkpointer copied is in the
database file alone; the log stays bounded; a salvage never pairs a damaged database's log
with the fresh one."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from collector_agent import Context, Event, FileChannel
from collector_agent.channels.file import checkpoint as file_checkpoint
from collector_agent.channels.file.salvage import finish_interrupted


def open_channel(directory: Path) -> FileChannel:
    channel = FileChannel("ck")
    channel.configure(
        Context(
            {"dataDirs": str(directory), "minimumRequiredSpace": "1048576", "transactionCapacity": "1000"},
            "a1.channels.ck.",
        )
    )
    channel.start()
    return channel


def put(channel: FileChannel, batches: int, size: int) -> None:
    for b in range(batches):
        with channel.transaction() as tx:
            tx.put_batch([Event({"b": str(b)}, bytes([b % 256]) * size) for _ in range(100)])


def rows_in_the_database_file_alone(directory: Path, into: Path) -> int:
    """Rows of ``channel.db`` read from a copy of that file without its log."""
    into.mkdir()
    shutil.copy(directory / "channel.db", into / "channel.db")
    with sqlite3.connect(into / "channel.db") as conn:
        if not conn.execute("SELECT name FROM sqlite_master WHERE name = 'batches'").fetchall():
            return 0  # even the schema is still in the log
        return int(conn.execute("SELECT count(*) FROM batches").fetchone()[0])


def test_commits_go_to_the_log_and_a_checkpoint_copies_them_into_the_database(tmp_path: Path) -> None:
    channel = open_channel(tmp_path / "channel")
    try:
        put(channel, batches=5, size=1000)
        assert (tmp_path / "channel" / "channel.db-wal").stat().st_size > 5 * 100 * 1000
        assert rows_in_the_database_file_alone(tmp_path / "channel", tmp_path / "before") == 0
        channel.checkpoint()
        assert rows_in_the_database_file_alone(tmp_path / "channel", tmp_path / "after") == 5
        with channel.transaction() as tx:
            assert len(tx.take_batch(1000)) == 500
    finally:
        channel.stop()


def test_the_log_stays_bounded_without_anyone_asking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_checkpoint, "TRIGGER_BYTES", 1 << 20)
    monkeypatch.setattr(file_checkpoint, "LIMIT_BYTES", 4 << 20)
    channel = open_channel(tmp_path / "channel")
    try:
        for _ in range(4):
            put(channel, batches=10, size=4000)  # 4 MB each time
            with channel.transaction() as tx:
                assert len(tx.take_batch(1000)) == 1000
        # every commit wrote into the log; the committers and the thread kept copying it out
        assert (tmp_path / "channel" / "channel.db-wal").stat().st_size <= 5 << 20  # 17 MB without
        assert channel.metrics()["CheckpointErrorCount"] == 0
    finally:
        channel.stop()
    assert not (tmp_path / "channel" / "channel.db-wal").exists()  # a clean stop folds it in


def test_an_interrupted_salvage_never_pairs_the_old_log_with_the_fresh_database(tmp_path: Path) -> None:
    channel = open_channel(tmp_path / "channel")
    put(channel, batches=2, size=100)
    channel.stop()
    directory = tmp_path / "channel"
    (directory / "channel.db").rename(directory / "channel.db.salvage")  # step 3 not done...
    (directory / "channel.db-wal").write_bytes(b"the damaged database's log" * 100)  # ...nor its log
    assert finish_interrupted(directory / "channel.db")
    assert not (directory / "channel.db-wal").exists()
    assert len(list(directory.glob("channel.db.corrupt-*-unpaired-wal"))) == 1
    again = open_channel(directory)
    try:
        assert again.size == 200
    finally:
        again.stop()
