"""Spark's ``raw_ingest`` inside ``artimon up`` (:class:`HistoryJob`, run by the component
:class:`History`): started on a thread (a JVM takes seconds to come up and nothing else
waits for it), stopped after the agent so that what it landed last is in the Parquet history
before the process exits. ``before_ingest`` runs first on the same session (``up``'s rebuild
of an empty VHMS from the history); its failure is logged and the job starts all the same.
The history lives under ``<data>/history`` (``file://``), or under ``root`` when given
(``hdfs://127.0.0.1:<port>/artimon/history`` with ``up --hdfs``). With ``kafka`` (the
brokers of ``up --kafka``) the job reads the agents' topic with Spark's Kafka source
(``raw_ingest --kafka``, the connector's jars resolved on the job's thread) instead of the
landing files. With a ``cluster``
(``artimon up --cluster``) the thread starts its standalone master and worker first and the
jobs run on them; ``stop`` stops them last. With a ``ledger`` (the agents' round ledger),
each committed micro-batch is reported to it (``spark_jobs/ledger_report.py``): the landing
files it read, or from Kafka the rounds of the records it stored; reading Kafka, the job
itself declares the ledger's ``history`` terminal (no ``raw`` sink does).

States: NEW --start()--> STARTING --(session and query up)--> RUNNING --stop()--> STOPPED;
a failure while starting is kept and reported by ``stop``, the rest of the stack runs on.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from artimon.servers import SparkCluster, spark_kafka_conf
from artimon.stack.agents import KAFKA_TOPIC
from artimon.stack.servers import Hdfs
from artimon.stack.vhms import Vhms
from collector_agent import RoundLedger
from vhms import VhmsClient
from vhms.server import VhmsService

log = logging.getLogger(__name__)

# a demo's thousand series need a fraction of a full site's Spark ($ARTIMON_SPARK_DRIVER_MEMORY
# sets it otherwise): one task at a time (two Python workers, not four), a heap of 1 GB:
# 1.4 GB for the whole demo stack, 1.85 GB before
DEMO_SPARK: dict[str, Any] = {
    "conf": {"spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "2"},
    "local_master": "local[1]",
}


class HistoryJob:
    def __init__(
        self,
        data: Path,
        *,
        interval: str,
        on_ready: Callable[[str], None],
        before_ingest: Callable[[Any], None] | None = None,
        root: str | None = None,
        cluster: SparkCluster | None = None,
        conf: dict[str, str] | None = None,
        local_master: str = "local[2]",
        ledger: RoundLedger | None = None,
        kafka: str | None = None,
    ) -> None:
        self.landing = data / "landing"
        self.ledger = ledger
        self.kafka = kafka
        self._reporter: Any = None
        self.conf = conf or {}
        self.local_master = local_master
        # URIs, never bare paths: a HADOOP_CONF_DIR in the environment would send those to its HDFS
        self.output = f"{root}/parquet" if root else (data / "history" / "parquet").as_uri()
        self.checkpoint = f"{root}/checkpoint" if root else (data / "history" / "checkpoint").as_uri()
        self.interval = interval
        self.log_file = data / "logs" / "spark.log"
        self.on_ready = on_ready
        self.before_ingest = before_ingest
        self.cluster = cluster
        self.error: BaseException | None = None
        self._spark: Any = None
        self._query: Any = None
        self._args: argparse.Namespace | None = None
        self._thread = threading.Thread(target=self._start, name="history", daemon=True)

    def start(self) -> None:
        self.landing.mkdir(parents=True, exist_ok=True)
        if self.ledger is not None and self.kafka:  # the rounds polled from now on await the history
            self.ledger.declare("history", self._place)
        self._thread.start()

    @property
    def _place(self) -> str:
        return f"raw_ingest of kafka topic {KAFKA_TOPIC}"

    def _start(self) -> None:
        try:
            from spark_jobs import (
                raw_ingest,  # pyspark's import alone takes a second
                spark_session,
            )

            master = self.local_master
            if self.cluster is not None:
                master = self.cluster.start().master_url
            # adaptive execution does not apply to a stream: off, rather than a warning per start
            settings = {"spark.sql.adaptive.enabled": "false", **self.conf}
            if self.kafka:
                settings = {**spark_kafka_conf(), **settings}
            self._spark = spark_session(
                master, "artimon-up-raw_ingest", conf=settings, log_file=self.log_file
            )
            if self.before_ingest is not None:
                try:
                    self.before_ingest(self._spark)
                except Exception:  # the history job runs on without it
                    log.exception("the step before raw_ingest failed")
            parser = argparse.ArgumentParser()
            raw_ingest.configure(parser)
            args = parser.parse_args(
                [
                    *self._source(),
                    *("--output", self.output, "--checkpoint", self.checkpoint, "--interval", self.interval),
                ]
            )
            self._args = args
            if self.ledger is not None:
                from spark_jobs import watch_commits

                rounds = bool(self.kafka)
                report = self.ledger.apply_report
                self._reporter = watch_commits(self._spark, self.checkpoint, report, rounds=rounds)
            self._query = raw_ingest.start(self._spark, args, report_rounds=self._reports_rounds)
        except Exception as exc:  # the stack runs on without its history; stop() reports it
            self.error = exc
            log.exception("spark raw_ingest did not start")
            return
        on = f" on {self.cluster.master_url} (web UI {self.cluster.web_url})" if self.cluster else ""
        source = f"kafka topic {KAFKA_TOPIC} of {self.kafka}" if self.kafka else str(self.landing)
        self.on_ready(f"{source} -> {self.output} every {self.interval}{on} (its log: {self.log_file})")

    @property
    def _reports_rounds(self) -> bool:
        """Whether the query collects its rounds for the ledger (reading Kafka)."""
        return self._reporter is not None and bool(self.kafka)

    def _source(self) -> list[str]:
        """raw_ingest's arguments for what it reads: the topic, or the landing files (deleted
        once in the history)."""
        if self.kafka:
            return ["--kafka", self.kafka, "--topic", KAFKA_TOPIC]
        return ["--landing", str(self.landing), "--processed", "delete"]

    def stop(self, timeout: float = 180.0) -> str:
        """Wait for the start (up to ``timeout``), process what has landed, stop; a line to print."""
        self._thread.join(timeout)
        try:
            if self._query is None:
                return f"spark raw_ingest did not run: {self.error or 'still starting'}"
            # stop the stream between two batches (stopped within one, its write is interrupted
            # and Spark logs the abort as an error; the checkpoint keeps it exactly-once either
            # way), then one run over what has landed since: processAllAvailable() would wait
            # for the next trigger, 5 minutes away
            _between_batches(self._query, timeout)
            self._query.stop()
            from spark_jobs import raw_ingest

            catch_up = argparse.Namespace(**{**vars(self._args), "once": True})
            landed = [] if self.kafka else sorted(self.landing.glob("*.avro"))  # all in the last run
            last = raw_ingest.start(self._spark, catch_up, report_rounds=self._reports_rounds)
            if not last.awaitTermination(timeout):  # a failed run raises here
                return f"spark raw_ingest: its last run did not end within {timeout:.0f} s (history behind)"
            if self._reporter is not None:
                self._reporter.close([*self._query.recentProgress, *last.recentProgress])
            return f"spark raw_ingest: history up to date in {self.output}{_cleaned(landed)}"
        finally:
            if self.ledger is not None and self.kafka:
                self.ledger.withdraw("history", self._place)
            if self._spark is not None:
                self._spark.stop()
            if self.cluster is not None:
                self.cluster.stop()


def _cleaned(landed: list[Path]) -> str:
    """Delete the landing files the last run has stored that Spark's cleanup (best effort,
    asynchronous: a file of the run's last batch can outlive the session) left; what it says."""
    left = [path for path in landed if path.exists()]
    for path in left:
        path.unlink(missing_ok=True)
    return f" ({len(left)} processed landing files Spark's cleanup had left, deleted)" if left else ""


def _between_batches(query: Any, timeout: float) -> None:
    """Return once ``query`` runs no batch (or ``timeout`` has passed, or it has ended)."""
    deadline = time.monotonic() + timeout
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.2)  # Spark tells the end of a batch by no event a caller can wait on


def _backfill(vhms: VhmsService, history: str, say: Callable[[str], None]) -> Callable[[Any], None]:
    """Rebuild an empty VHMS from the Parquet history (a ``file://`` or ``hdfs://`` URI):
    its retention window (the coarsest ring's), through its Thrift service (so its
    write-ahead log keeps what it gets); nothing when there is no history yet."""
    retention_ms = max(r.step_ms * r.slots for r in vhms.store.resolutions)

    def run(spark: Any) -> None:
        from spark_jobs import backfill_vhms, history_exists  # pyspark's import is slow

        if not history_exists(spark, history):
            return
        end = int(time.time() * 1000) + 60_000
        started = time.monotonic()
        with VhmsClient(vhms.host, vhms.port, timeout=120) as client:
            sent = backfill_vhms.backfill(spark, history, end - retention_ms, end, client)
        say(
            f"[ready] backfill   {sent} samples of the last {retention_ms // 3_600_000} h from {history} "
            f"into vhms in {time.monotonic() - started:.1f} s, {vhms.store.series} series now"
        )

    return run


class History:
    """Spark's raw_ingest as a component (reading the topic of ``$ARTIMON_KAFKA`` with
    ``kafka``, else the landing files): its ``[ready] spark`` line (and the backfill's, when
    VHMS starts empty while a history exists) comes later, through ``say``, from the job's
    thread; its stop brings the history up to date and says so."""

    name = "spark"

    def __init__(
        self,
        data: Path,
        vhms: Vhms,
        *,
        demo: bool,
        hdfs: Hdfs | None,
        cluster: bool,
        kafka: bool,
        say: Callable[[str], None],
        ledger: RoundLedger | None = None,
    ) -> None:
        self.vhms = vhms
        self.kafka = kafka
        self.job = HistoryJob(
            data,
            interval="10 seconds" if demo else "5 minutes",
            on_ready=lambda where: say(f"[ready] spark      raw_ingest {where}"),
            root=f"{hdfs.uri}/artimon/history" if hdfs else None,
            cluster=SparkCluster(data / "spark") if cluster else None,
            ledger=ledger,
            **(DEMO_SPARK if demo and "ARTIMON_SPARK_DRIVER_MEMORY" not in os.environ else {}),
        )
        self.say = say

    def start(self) -> None:
        if self.kafka:  # set by the Kafka component, which starts before this one
            self.job.kafka = os.environ["ARTIMON_KAFKA"]
        service = self.vhms.service
        if service.store.series == 0:
            self.job.before_ingest = _backfill(service, self.job.output, self.say)
        self.job.start()

    def ready_lines(self) -> list[str]:
        return []  # said by the job's thread, once Spark's JVM is up

    def stop(self) -> str:
        return self.job.stop()
