"""What ``raw_ingest`` tells the agents' round ledgers: the landing files each committed
micro-batch read (the agent knows which rounds' batches it landed in which file;
``collector_agent/ledger.py``).

Spark's file source writes, for micro-batch *n*, the files it reads in
``<checkpoint>/sources/0/<n>`` (every tenth batch a compacted ``<n>.compact`` that holds the
earlier entries too, after which Spark may remove the earlier files): a ``v1`` line, then a
JSON object per file with its ``path`` and ``batchId``. The batch is committed, its Parquet
files in the history, once ``<checkpoint>/commits/<n>`` exists. After each micro-batch (a
``StreamingQueryListener``'s progress event) and once more when the query ends,
:meth:`LedgerReporter.report` reads the batches committed since its last report through the
job's Hadoop file system (``file://`` or ``hdfs://``) and hands their landing files' names to
``send``: with ``--ledger URL`` (repeatable), a ``POST`` of ``{"files": [...]}`` to each
agent's ``/ledger``.

A send that fails is counted (``failures``), logged once per burst, and its names are sent
again with the next report (the newest ``MAX_PENDING``). A reporter starts by sending the
last ``RESTART_BATCHES`` committed batches again: a job stopped between a commit and its
report loses no report, and an agent ignores names it does not know.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import httpx
from pyspark.sql.streaming.listener import StreamingQueryListener

__all__ = ["LedgerReporter", "http_sender", "watch_commits"]

log = logging.getLogger(__name__)

MAX_PENDING = 100_000
RESTART_BATCHES = 10
TIMEOUT_S = 10.0


def http_sender(urls: Sequence[str], timeout: float = TIMEOUT_S) -> Callable[[list[str]], None]:
    """A ``send`` that posts the names to each ledger URL (``http://host:port/ledger``);
    raises on any answer but 200."""

    def send(files: list[str]) -> None:
        for url in urls:
            answer = httpx.post(url, json={"files": files}, timeout=timeout)
            if answer.status_code != 200:
                raise RuntimeError(f"{url} answered {answer.status_code}: {answer.text[:200]}")

    return send


class LedgerReporter:
    """See the module doc; thread-safe (the listener's thread and the job's)."""

    def __init__(self, spark: Any, checkpoint: str, send: Callable[[list[str]], object]) -> None:
        self._jvm = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()
        self.checkpoint = checkpoint.rstrip("/")
        self.send = send
        self.failures = 0
        self._lock = threading.Lock()
        self._reported: int | None = None  # the last batch reported
        self._pending: list[str] = []
        self._unwatch: Callable[[], None] | None = None

    def close(self) -> None:
        """No more calls after each micro-batch; one last report."""
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        self.report()

    def report(self) -> int:
        """Send the landing files of the batches committed since the last report; how many."""
        with self._lock:
            committed = sorted(self._batches(f"{self.checkpoint}/commits"))
            last = self._reported
            new = committed[-RESTART_BATCHES:] if last is None else [b for b in committed if b > last]
            files = self._pending + (self._files_of(new) if new else [])
            if new:
                self._reported = new[-1]
            if not files:
                return 0
            try:
                self.send(files)
            except Exception as exc:
                self.failures += 1
                if not self._pending:
                    log.warning("raw_ingest: the round ledger did not take a report (kept): %s", exc)
                self._pending = files[-MAX_PENDING:]
                return 0
            if self._pending:
                log.info("raw_ingest: the round ledger takes reports again")
            self._pending = []
            return len(files)

    def _path(self, uri: str) -> tuple[Any, Any]:
        path = self._jvm.org.apache.hadoop.fs.Path(uri)
        return path.getFileSystem(self._conf), path

    def _batches(self, directory: str) -> list[int]:
        fs, path = self._path(directory)
        if not fs.exists(path):
            return []
        names = [status.getPath().getName() for status in fs.listStatus(path)]
        return [int(name) for name in names if name.isdigit()]

    def _read(self, uri: str) -> str | None:
        fs, path = self._path(uri)
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def _files_of(self, batches: list[int]) -> list[str]:
        """The landing files of ``batches``: each in its own log file, or, once Spark removed
        that after a compaction, in the first compacted file at or after it."""
        sources = f"{self.checkpoint}/sources/0"
        fs, path = self._path(sources)
        names = {status.getPath().getName() for status in fs.listStatus(path)} if fs.exists(path) else set()
        compacts = sorted(int(name.partition(".")[0]) for name in names if name.endswith(".compact"))
        wanted: dict[str, set[int]] = {}
        for batch in batches:
            if str(batch) in names:
                wanted.setdefault(str(batch), set()).add(batch)
            else:
                after = next((c for c in compacts if c >= batch), None)
                if after is not None:
                    wanted.setdefault(f"{after}.compact", set()).add(batch)
        files = []
        for name, of in wanted.items():
            text = self._read(f"{sources}/{name}") or ""
            entries = [json.loads(line) for line in text.splitlines()[1:] if line.strip()]
            files += [str(e["path"]).rpartition("/")[2] for e in entries if e.get("batchId") in of]
        return files


class _Listener(StreamingQueryListener):
    def __init__(self, reporter: LedgerReporter) -> None:
        self.reporter = reporter

    def onQueryStarted(self, event: Any) -> None:
        """Nothing is committed when a query starts."""

    def onQueryProgress(self, event: Any) -> None:
        try:
            self.reporter.report()
        except Exception:  # the listener's thread must outlive a checkpoint it cannot read
            log.exception("raw_ingest: reading the committed landing files failed")

    def onQueryIdle(self, event: Any) -> None:
        """An idle trigger commits nothing."""

    def onQueryTerminated(self, event: Any) -> None:
        """The job reports once more itself when its query has ended."""


def watch_commits(spark: Any, checkpoint: str, send: Callable[[list[str]], object]) -> LedgerReporter:
    """A reporter on ``checkpoint`` called after each micro-batch of the session's queries
    until its :meth:`~LedgerReporter.close`."""
    reporter = LedgerReporter(spark, checkpoint, send)
    listener = _Listener(reporter)
    spark.streams.addListener(listener)
    reporter._unwatch = lambda: spark.streams.removeListener(listener)
    return reporter
