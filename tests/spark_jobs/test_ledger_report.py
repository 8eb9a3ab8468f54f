"""``raw_ingest``'s report to the round ledgers reads the landing files of each committed
micro-batch from the checkpoint's file-source log, compacted or not, and keeps what a
ledger did not take for the next report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark_jobs.ledger_report import RESTART_BATCHES, LedgerReporter

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
    sent: list[list[str]] = []
    reporter = LedgerReporter(spark, checkpoint.as_uri(), sent.append)
    assert reporter.report() == RESTART_BATCHES  # a fresh reporter sends the last ten again
    assert sent == [[f"raw-{b}.avro" for b in range(2, 12)]]
    assert reporter.report() == 0 and len(sent) == 1
    commit(checkpoint, 12)
    assert reporter.report() == 1 and sent[-1] == ["raw-12.avro"]


def test_a_report_the_ledger_did_not_take_is_sent_with_the_next(spark: Any, checkpoint: Path) -> None:
    sent: list[list[str]] = []

    def send(files: list[str]) -> None:
        if len(sent) == 1:
            sent.append([])
            raise OSError("connection refused")
        sent.append(files)

    reporter = LedgerReporter(spark, checkpoint.as_uri(), send)
    reporter.report()
    commit(checkpoint, 12)
    assert reporter.report() == 0 and reporter.failures == 1
    commit(checkpoint, 13)
    (checkpoint / "sources" / "0" / "13").write_text(log_text(range(13, 14)))
    assert reporter.report() == 2 and sent[-1] == ["raw-12.avro", "raw-13.avro"]


def test_no_checkpoint_yet_sends_nothing(spark: Any, tmp_path: Path) -> None:
    reporter = LedgerReporter(spark, (tmp_path / "none").as_uri(), lambda files: pytest.fail(f"sent {files}"))
    assert reporter.report() == 0
