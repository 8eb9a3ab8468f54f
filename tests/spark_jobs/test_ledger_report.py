"""``raw_ingest``'s report to the round ledgers reads the landing files of each committed
micro-batch from the checkpoint's file-source log, compacted or not, or from Kafka the rounds
each batch's progress carries, and keeps what a ledger did not take for the next report."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from spark_jobs.ledger_report import RESTART_BATCHES, ROUNDS_METRICS, LedgerReporter

pytestmark = [pytest.mark.spark]


def log_text(batches: range) -> str:
    entries = [{"path": f"file:///landing/raw-{b}.avro", "timestamp": 1, "batchId": b} for b in batches]
    return "v1\n" + "".join(json.dumps(entry) + "\n" for entry in entries)


def commit(checkpoint: Path, batch: int) -> None:
    (checkpoint / "sources" / "0" / str(batch)).write_text(log_text(range(batch, batch + 1)))
    (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    """Batches 0 to 11 committed; Spark compacted the log at 9 and removed 0 to 8."""
    root = tmp_path / "checkpoint"
    (root / "sources" / "0").mkdir(parents=True)
    (root / "commits").mkdir()
    for batch in range(12):
        commit(root, batch)
    for batch in range(9):
        (root / "sources" / "0" / str(batch)).unlink()
    (root / "sources" / "0" / "9").unlink()
    (root / "sources" / "0" / "9.compact").write_text(log_text(range(10)))
    (root / "sources" / "0" / "12").write_text(log_text(range(12, 13)))  # planned, not committed
    return root


def test_the_committed_batches_landing_files_are_sent_once_each(spark: Any, checkpoint: Path) -> None:
    sent: list[dict[str, Any]] = []
    reporter = LedgerReporter(spark, checkpoint.as_uri(), sent.append)
    assert reporter.report() == RESTART_BATCHES  # a fresh reporter sends the last ten again
    assert sent == [{"files": [f"raw-{b}.avro" for b in range(2, 12)]}]
    assert reporter.report() == 0 and len(sent) == 1
    commit(checkpoint, 12)
    assert reporter.report() == 1 and sent[-1] == {"files": ["raw-12.avro"]}


def test_a_report_the_ledger_did_not_take_is_sent_with_the_next(spark: Any, checkpoint: Path) -> None:
    sent: list[dict[str, Any]] = []

    def send(report: dict[str, Any]) -> None:
        if len(sent) == 1:
            sent.append({})
            raise OSError("connection refused")
        sent.append(report)

    reporter = LedgerReporter(spark, checkpoint.as_uri(), send)
    reporter.report()
    commit(checkpoint, 12)
    assert reporter.report() == 0 and reporter.failures == 1
    commit(checkpoint, 13)
    (checkpoint / "sources" / "0" / "13").write_text(log_text(range(13, 14)))
    assert reporter.report() == 2 and sent[-1] == {"files": ["raw-12.avro", "raw-13.avro"]}


def test_no_checkpoint_yet_sends_nothing(spark: Any, tmp_path: Path) -> None:
    reporter = LedgerReporter(spark, (tmp_path / "none").as_uri(), lambda files: pytest.fail(f"sent {files}"))
    assert reporter.report() == 0


def progress(batch: int, rounds: list[tuple[int, str, int]], query: str = "q1") -> SimpleNamespace:
    """A micro-batch's progress as Spark hands it over, with the rounds it stored."""
    batches = [{"round_ms": r, "endpoint": e, "samples": n} for r, e, n in rounds]
    return SimpleNamespace(batchId=batch, id=query, observedMetrics={ROUNDS_METRICS: {"batches": batches}})


def test_from_kafka_each_batchs_rounds_are_sent_once_as_history_commits(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text('{"id":"q1"}')
    sent: list[dict[str, Any]] = []
    reporter = LedgerReporter(spark, tmp_path.as_uri(), sent.append, rounds=True)
    first = progress(0, [(60_000, "a:1:u", 10), (60_000, "b:1:u", 12)])
    assert reporter.report([first]) == 2
    assert sent == [{"terminal": "history", "commits": [[60_000, "a:1:u", 10], [60_000, "b:1:u", 12]]}]
    other = progress(1, [(120_000, "c:1:u", 5)], query="another query of the session")
    assert reporter.report([first, other]) == 0 and len(sent) == 1  # reported already; not ours
    assert reporter.report([progress(2, []), progress(1, [(120_000, "a:1:u", 10)])]) == 1
    assert sent[-1] == {"terminal": "history", "commits": [[120_000, "a:1:u", 10]]}
