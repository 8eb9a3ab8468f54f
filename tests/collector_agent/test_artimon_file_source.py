from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from artimon.stack import agent_properties
from bookkeeper import Bookkeeper, VarType
from bookkeeper.export import write_snapshot_file
from bookkeeper.ground import decode_sample_batch
from collector_agent import Agent


def properties(directory: Path) -> str:
    """An artimon_file source on ``directory`` into a channel nobody drains."""
    files = {
        "type": "artimon_file",
        "directory": directory,
        "interval": 0.05,
        "batchSize": 2,
        "maxFileSize": 4096,
        "maxBackoffSleep": 50,
        "channels": "ch",
    }
    return agent_properties(
        "a",
        sources={"files": files},
        channels={"ch": {"type": "memory"}, "idle": {"type": "memory"}},
        sinks={"none": {"type": "null", "channel": "idle"}},
    )


def app_file(directory: Path, module: str, value: int) -> Path:
    bk = Bookkeeper(module, labels={"module": module}, environ={})
    bk.integer("jobs.done", queue="q1").set(value)
    bk.double("load").set(0.5)
    path = directory / f"{module}.artimon"
    write_snapshot_file(bk, path)
    return path


@pytest.fixture
def drop(tmp_path: Path) -> Path:
    directory = tmp_path / "run"
    directory.mkdir()
    return directory


def test_reads_each_file_into_one_event_and_skips_unchanged_files(
    drop: Path, tmp_path: Path, wait: Callable[..., None]
) -> None:
    for i, module in enumerate(["alpha", "beta", "gamma"]):
        app_file(drop, module, i)
    (drop / "ignored.txt").write_text("not ours")
    agent = Agent.from_properties(properties(drop), "a", {})
    agent.start()
    try:
        wait(lambda: agent.channels["ch"].size == 3, what="three files read")
        metrics_before = agent.metrics()["SOURCE.files"]["EventAcceptedCount"]
        app_file(drop, "beta", 42)  # only beta changes
        wait(lambda: agent.channels["ch"].size == 4, what="the changed file read again")
        with agent.channels["ch"].transaction() as tx:
            events = tx.take_batch(100)
    finally:
        agent.stop()
    assert metrics_before == 3
    assert [e.headers["artimon.context"] for e in events] == ["alpha", "beta", "gamma", "beta"]
    assert all(int(e.headers["artimon.round"]) % 50 == 0 for e in events)
    batch = decode_sample_batch(events[-1].body)
    values = {s.name: (s.type, s.value, s.labels.get("queue")) for s in batch.samples()}
    assert values["jobs.done"] == (VarType.INTEGER, 42, "q1")
    assert values["load"][:2] == (VarType.DOUBLE, 0.5)
    assert batch.context == "beta"


def test_refuses_escapes_oversized_and_malformed_files(
    drop: Path, tmp_path: Path, wait: Callable[..., None], caplog: pytest.LogCaptureFixture
) -> None:
    outside = app_file(tmp_path, "secret", 1)
    os.symlink(outside, drop / "escape.artimon")
    (drop / "huge.artimon").write_text("1 x{} 1\n" * 1000)
    (drop / "broken.artimon").write_text("1 ok{} 1\nthis is not a line\n")
    app_file(drop, "good", 7)
    agent = Agent.from_properties(properties(drop), "a", {})
    agent.start()
    try:
        wait(lambda: agent.channels["ch"].size == 1, what="the good file")
        wait(lambda: agent.metrics()["SOURCE.files"]["EventReadFail"] >= 3, what="three refusals")
    finally:
        agent.stop()
    assert "resolves to" in caplog.text and "outside" in caplog.text
    assert "maxFileSize 4096" in caplog.text
    assert "line 2" in caplog.text
    assert caplog.text.count("skipping") == 3  # logged once per file, not every round
