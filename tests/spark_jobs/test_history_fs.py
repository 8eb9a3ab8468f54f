"""How the Spark jobs sort the history's file system failures: refused for good (a
``HistoryPathError`` naming the path), unavailable for now (retried with a doubling backoff,
afresh after progress), anything else raised as it is. The real daemons' side is in
test_hdfs_faults.py."""

from __future__ import annotations

import logging

import pytest

from spark_jobs import HistoryPathError
from spark_jobs.history_fs import is_transient, refusal, run_with_retries

PATHS = ["hdfs://nn:8020/artimon/history/parquet", "hdfs://nn:8020/artimon/history/checkpoint"]
SAFE_MODE = RuntimeError(
    "org.apache.hadoop.ipc.RemoteException(org.apache.hadoop.hdfs.server.namenode.SafeModeException): "
    "Cannot create directory /artimon/history. Name node is in safe mode."
)
DENIED = RuntimeError(
    "py4j.protocol.Py4JJavaError: An error occurred\n"
    "org.apache.hadoop.security.AccessControlException: Permission denied: user=alice, access=WRITE, "
    'inode="/artimon":hdfs:supergroup:drwxr-xr-x\n\tat org.apache.hadoop...'
)


class Failing:
    """Fails with ``errors`` in turn, then returns ``"done"``; counts its calls."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def test_failures_are_sorted_by_their_java_cause() -> None:
    assert refusal(DENIED) == "permission denied"
    assert refusal(RuntimeError("DSQuotaExceededException: The DiskSpace quota of /q is exceeded")) == (
        "space quota exceeded"
    )
    assert is_transient(SAFE_MODE) and not is_transient(DENIED)
    assert is_transient(RuntimeError("java.net.ConnectException: Connection refused"))
    assert is_transient(  # the NameNode killed during a call
        RuntimeError("Call From vm to localhost:8020 failed on socket exception: java.net.SocketException")
    )
    assert not is_transient(ValueError("a landing record whose vectors disagree"))


def test_safe_mode_is_retried_with_a_doubling_backoff_and_a_clear_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slept: list[float] = []
    action = Failing(SAFE_MODE, SAFE_MODE, SAFE_MODE)
    with caplog.at_level(logging.WARNING, logger="spark_jobs.history_fs"):
        assert (
            run_with_retries(action, PATHS, sleep=slept.append, first_backoff_s=1, max_backoff_s=3) == "done"
        )
    assert slept == [1, 2, 3] and action.calls == 4
    assert f"raw_ingest: the NameNode is in safe mode at {PATHS[0]} and {PATHS[1]}" in caplog.text
    assert "retry 1 of 20 in 1 s, from the checkpoint" in caplog.text


def test_a_refusal_names_the_path_at_once_and_other_errors_pass_through() -> None:
    action = Failing(DENIED)
    with pytest.raises(
        HistoryPathError, match=r"permission denied on the history path hdfs://nn:8020/artimon"
    ):
        run_with_retries(action, PATHS, sleep=lambda s: None)
    assert action.calls == 1
    with pytest.raises(ValueError, match="vectors disagree"):
        run_with_retries(Failing(ValueError("vectors disagree")), PATHS, sleep=lambda s: None)


def test_retries_are_bounded_and_start_afresh_after_progress() -> None:
    with pytest.raises(RuntimeError, match="SafeModeException"):
        run_with_retries(Failing(*[SAFE_MODE] * 4), PATHS, max_retries=3, sleep=lambda s: None)
    slept: list[float] = []
    progress = iter([False, False, True, False, False])
    done = run_with_retries(
        Failing(*[SAFE_MODE] * 5), PATHS, max_retries=3, sleep=slept.append, progressed=lambda: next(progress)
    )
    assert done == "done" and slept == [1, 2, 1, 2, 4]
