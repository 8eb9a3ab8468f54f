"""What the history's file system (``file://`` or ``hdfs://``) can do to a job, and the
job's answer.

A failure of a Spark action is sorted by the Java exception it carries:

- **refused for good**, ``AccessControlException`` (permission denied) or a
  ``QuotaExceededException`` (space or name quota): :class:`~spark_jobs.HistoryPathError`
  naming the path and the reason; retrying would only repeat it.
- **unavailable for now**: the NameNode in safe mode (``SafeModeException``, after a restart
  until the DataNodes reported their blocks, or by an operator's ``dfsadmin -safemode
  enter``), the NameNode or a DataNode down (connection refused, a block without a live
  replica, a write pipeline with no DataNode left). :func:`run_with_retries` logs one clear
  line per attempt and runs the action again after a backoff that doubles up to
  ``max_backoff_s``: a streaming query resumes from its checkpoint, which makes the retried
  batch exactly-once, and the landing files stay until a batch committed them. An attempt
  that ``progressed`` (a streaming query that completed a trigger before it failed) starts
  the count and the backoff afresh: a job that runs for days meets many separate outages.
- anything else is raised as it is.

States of :func:`run_with_retries`: RUNNING --transient failure--> BACKING_OFF --sleep-->
RUNNING; RUNNING --done--> DONE; RUNNING --refused, other failure or retries spent--> FAILED.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from spark_jobs.exceptions import HistoryPathError

__all__ = ["history_exists", "is_transient", "refusal", "run_with_retries"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_REFUSED = {
    "AccessControlException": "permission denied",
    "Permission denied": "permission denied",
    "DSQuotaExceededException": "space quota exceeded",
    "NSQuotaExceededException": "name quota exceeded",
    "QuotaExceededException": "quota exceeded",
}
_SAFE_MODE = ("SafeModeException", "in safe mode")
_UNAVAILABLE = (
    *_SAFE_MODE,
    "RetriableException",
    "java.net.ConnectException",
    "Connection refused",
    "Connection reset",
    "java.net.SocketException",
    "End of File Exception between",  # the NameNode gone in the middle of a call
    "java.net.SocketTimeoutException",
    "StandbyException",
    "BlockMissingException",
    "Could not obtain block",
    "could only be written to 0 of the",
    "All datanodes",
    "No live nodes contain",
    "No active and not excluded nodes",
    "Unable to create new block",
)


def refusal(error: BaseException) -> str | None:
    """Why the file system refused for good (``"permission denied"``...), else ``None``."""
    text = str(error)
    return next((reason for marker, reason in _REFUSED.items() if marker in text), None)


def is_transient(error: BaseException) -> bool:
    """The file system is unavailable for now (safe mode, a daemon down)."""
    text = str(error)
    return refusal(error) is None and any(marker in text for marker in _UNAVAILABLE)


def _first_line(error: BaseException, markers: Sequence[str]) -> str:
    """The line of the Java trace that names the cause, not pages of stack."""
    lines = str(error).splitlines()
    return next(
        (line.strip() for line in lines if any(m in line for m in markers)), lines[0] if lines else ""
    )


def run_with_retries(
    action: Callable[[], T],
    paths: Sequence[str],
    *,
    what: str = "raw_ingest",
    max_retries: int = 20,
    first_backoff_s: float = 1.0,
    max_backoff_s: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
    progressed: Callable[[], bool] = lambda: False,
) -> T:
    """``action()``, run again while the history's file system is unavailable (see the
    module doc); :class:`HistoryPathError` naming ``paths`` when it refuses for good."""
    backoff = first_backoff_s
    attempt = 0
    while True:
        attempt += 1
        try:
            return action()
        except Exception as exc:  # a Py4J or captured Spark error: sorted by its Java cause
            reason = refusal(exc)
            if reason is not None:
                raise HistoryPathError(
                    f"{what}: {reason} on the history path {' or '.join(paths)}: "
                    f"{_first_line(exc, list(_REFUSED))} (the landing files stay)"
                ) from exc
            if progressed():
                attempt, backoff = 1, first_backoff_s
            if not is_transient(exc) or attempt > max_retries:
                raise
            cause = (
                "the NameNode is in safe mode"
                if any(m in str(exc) for m in _SAFE_MODE)
                else "HDFS unavailable"
            )
            log.warning(
                "%s: %s at %s (%s); retry %d of %d in %.0f s, from the checkpoint",
                what,
                cause,
                " and ".join(paths),
                _first_line(exc, _UNAVAILABLE),
                attempt,
                max_retries,
                backoff,
            )
            sleep(backoff)
            backoff = min(backoff * 2, max_backoff_s)


def history_exists(spark: object, uri: str) -> bool:
    """Whether ``uri`` exists on its file system (Hadoop's, so ``hdfs://`` and ``file://``
    alike), through the session's Hadoop configuration."""
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return bool(path.getFileSystem(conf).exists(path))
