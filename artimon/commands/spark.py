"""Run a Spark job (``raw_ingest``, ``analyze``, ``backfill_vhms``) with ``--master``
(default ``local[*]``; ``spark://HOST:PORT`` for a standalone cluster) and any Spark
setting as ``--conf KEY=VALUE``, as spark-submit takes them. ``--metrics-port`` serves the
process's ``/metrics`` and ``/health`` while the job runs (for ``raw_ingest``, with its lag
behind a local landing directory). ``raw_ingest --kafka`` gets Spark's Kafka connector on its
class path (``spark.jars``, resolved with Maven on the first run)."""

from __future__ import annotations

import argparse
from pathlib import Path

import spark_jobs
from artimon.commands._metrics import serve_metrics
from artimon.commands._web import web_config_of
from artimon.servers import spark_kafka_conf
from artimon.stack import LandingBacklog
from spark_jobs import spark_session


def run(args: argparse.Namespace) -> int:
    web_config = web_config_of(args, "spark")
    # raw_ingest --kafka: Spark's Kafka connector on the class path (resolved with Maven once)
    connector = spark_kafka_conf() if getattr(args, "kafka", None) else {}
    spark = spark_session(args.master, f"artimon-{args.job}", conf={**connector, **dict(args.conf)})
    # raw_ingest's lag: the landing files it has not taken yet (a local landing directory)
    landing = getattr(args, "landing", None) or ""
    collectors = [LandingBacklog(Path(landing))] if args.job == "raw_ingest" and "://" not in landing else []
    metrics = serve_metrics(args, args.job, collectors, web_config)
    try:
        return int(getattr(spark_jobs, args.job).run_query(spark, args))
    finally:
        if metrics is not None:
            metrics.stop()
        spark.stop()
