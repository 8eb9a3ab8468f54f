"""What ``raw_ingest`` tells the agents' round ledgers (``collector_agent/ledger.py``) after
each committed micro-batch, as ``send`` takes it: the body of ``POST /ledger``.

**From landing files**: the landing files the batch read (the agent knows which rounds'
batches it landed in which file), ``{"files": [...]}``. Spark's file source writes, for
micro-batch *n*, the files it reads in ``<checkpoint>/sources/0/<n>`` (every tenth batch a
compacted ``<n>.compact`` that holds the earlier entries too, after which Spark may remove
the earlier files): a ``v1`` line, then a JSON object per file with its ``path`` and
``batchId``. The batch is committed, its Parquet files in the history, once
``<checkpoint>/commits/<n>`` exists. After each micro-batch (a ``StreamingQueryListener``'s
progress event) and once more when the query ends, :meth:`LedgerReporter.report` reads the
batches committed since its last report through the job's Hadoop file system (``file://``
or ``hdfs://``). A reporter starts by sending the last ``RESTART_BATCHES`` committed batches
again: a job stopped between a commit and its report loses no report, and an agent ignores
names it does not know.

**From Kafka** (``rounds``): no file names a batch, so the query itself collects, for each
record it stores, the round, endpoint (its ``artimon.round`` and ``artimon.endpoint``
headers) and samples, as the micro-batch's observed metrics :data:`ROUNDS_METRICS`
(``raw_ingest``; a record set aside by the integrity check is not among them), which Spark
hands over with the batch's progress, after its commit. They are sent as the history's
commits, ``{"terminal": "history", "commits": [[round_ms, endpoint, samples], ...]}``; the
ledger counts a batch delivered twice once. A progress lost (the job killed between a commit
and its progress event) loses that batch's report: its rounds look as if they waited at the
history, their samples are there. Spark keeps the last
``spark.sql.streaming.numRecentProgressUpdates`` (100) progress updates, these lists with
them: a row per record of a micro-batch.

A send that fails is counted (``failures``), logged once per burst, and what it held is sent
again with the next report (the newest ``MAX_PENDING`` names or commits). :func:`http_sender`
posts a report to each agent's ``/ledger`` in parts of at most ``MAX_PART`` names or commits
(an agent takes at most 100,000 and 8 MiB).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import httpx
from pyspark.sql.streaming.listener import StreamingQueryListener

__all__ = ["ROUNDS_METRICS", "LedgerReporter", "http_sender", "watch_commits"]

log = logging.getLogger(__name__)

MAX_PENDING = 100_000
RESTART_BATCHES = 10
TIMEOUT_S = 10.0
MAX_PART = 50_000  # names or commits per POST: a commit is about 70 bytes of JSON
ROUNDS_METRICS = "rounds"  # raw_ingest --kafka's observed metrics: the (round, endpoint, samples) stored
Report = dict[str, Any]  # the body of POST /ledger


def http_sender(urls: Sequence[str], timeout: float = TIMEOUT_S) -> Callable[[Report], None]:
    """A ``send`` that posts a report to each ledger URL (``http://host:port/ledger``) in
    parts of at most ``MAX_PART`` items; raises on any answer but 200."""

    def send(report: Report) -> None:
        key = "commits" if "commits" in report else "files"
        items = report[key]
        for url in urls:
            for first in range(0, len(items), MAX_PART):
                part = {**report, key: items[first : first + MAX_PART]}
                answer = httpx.post(url, json=part, timeout=timeout)
                if answer.status_code != 200:
                    raise RuntimeError(f"{url} answered {answer.status_code}: {answer.text[:200]}")

    return send


class LedgerReporter:
    """See the module doc; ``rounds`` for a query that reads Kafka. Thread-safe (the
    listener's thread and the job's)."""

    def __init__(
        self, spark: Any, checkpoint: str, send: Callable[[Report], object], *, rounds: bool = False
    ) -> None:
        self._jvm = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()
        self.checkpoint = checkpoint.rstrip("/")
        self.send = send
        self.rounds = rounds
        self.failures = 0
        self._lock = threading.Lock()
        self._reported: int | None = None  # the last batch reported
        self._pending: list[Any] = []
        self._id: str | None = None
        self._unwatch: Callable[[], None] | None = None

    def close(self, progress: Iterable[Any] = ()) -> None:
        """No more calls after each micro-batch; one last report (with the queries' last
        ``progress`` when reading Kafka: its listener event may not have come yet)."""
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        self.report(progress)

    def report(self, progress: Iterable[Any] = ()) -> int:
        """Send what the batches committed since the last report hold (from Kafka: what
        ``progress``, the queries' progress updates, says of them); how many items."""
        with self._lock:
            items = self._pending + (self._rounds_of(progress) if self.rounds else self._new_files())
            if not items:
                return 0
            try:
                self.send({"terminal": "history", "commits": items} if self.rounds else {"files": items})
            except Exception as exc:
                self.failures += 1
                if not self._pending:
                    log.warning("raw_ingest: the round ledger did not take a report (kept): %s", exc)
                self._pending = items[-MAX_PENDING:]
                return 0
            if self._pending:
                log.info("raw_ingest: the round ledger takes reports again")
            self._pending = []
            return len(items)

    def _new_files(self) -> list[str]:
        committed = sorted(self._batches(f"{self.checkpoint}/commits"))
        last = self._reported
        new = committed[-RESTART_BATCHES:] if last is None else [b for b in committed if b > last]
        if not new:
            return []
        self._reported = new[-1]
        return self._files_of(new)

    def _rounds_of(self, progress: Iterable[Any]) -> list[list[Any]]:
        """The commits of the progress updates of batches not reported yet."""
        commits: list[list[Any]] = []
        for update in sorted(progress, key=lambda update: int(update.batchId)):
            batch = int(update.batchId)
            metrics = update.observedMetrics.get(ROUNDS_METRICS)
            if metrics is None or (self._reported is not None and batch <= self._reported):
                continue
            if str(update.id) != self._query_id():  # another query of the session
                continue
            self._reported = batch
            commits += [[row["round_ms"], row["endpoint"], row["samples"]] for row in metrics["batches"]]
        return commits

    def _query_id(self) -> str | None:
        """The id of the checkpoint's query (kept across its restarts), once it has one."""
        if self._id is None:
            text = self._read(f"{self.checkpoint}/metadata")
            self._id = json.loads(text)["id"] if text else None
        return self._id

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
            self.reporter.report([event.progress])
        except Exception:  # the listener's thread must outlive a checkpoint it cannot read
            log.exception("raw_ingest: reading what the committed micro-batches held failed")

    def onQueryIdle(self, event: Any) -> None:
        """An idle trigger commits nothing."""

    def onQueryTerminated(self, event: Any) -> None:
        """The job reports once more itself when its query has ended."""


def watch_commits(
    spark: Any, checkpoint: str, send: Callable[[Report], object], *, rounds: bool = False
) -> LedgerReporter:
    """A reporter on ``checkpoint`` (``rounds``: of a query that reads Kafka) called after each
    micro-batch of the session's queries until its :meth:`~LedgerReporter.close`."""
    reporter = LedgerReporter(spark, checkpoint, send, rounds=rounds)
    listener = _Listener(reporter)
    spark.streams.addListener(listener)
    reporter._unwatch = lambda: spark.streams.removeListener(listener)
    return reporter
