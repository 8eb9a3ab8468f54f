"""Run a Spark job (``raw_ingest``, ``analyze``, ``backfill_vhms``) with ``--master``
(default ``local[*]``; ``spark://HOST:PORT`` for a standalone cluster) and any Spark
setting as ``--conf KEY=VALUE``, as spark-submit takes them. ``--metrics-port`` serves the
process's ``/metrics`` and ``/health`` while the job runs (for ``raw_ingest``, with its lag
behind a local landing directory)."""

from __future__ import annotations

import argparse
from pathlib import Path

from artimon.commands._metrics import LandingBacklog, add_metrics_arguments, serve_metrics
from spark_jobs import analyze, backfill_vhms, raw_ingest, spark_session

JOBS = {"raw_ingest": raw_ingest, "analyze": analyze, "backfill_vhms": backfill_vhms}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--master", default="local[*]", help="Spark master: local[*] (default), spark://HOST:PORT, yarn"
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        type=_setting,
        metavar="KEY=VALUE",
        help="a Spark setting, e.g. spark.executor.memory=2g (repeatable)",
    )
    add_metrics_arguments(parser)
    jobs = parser.add_subparsers(dest="job", metavar="<job>", required=True)
    for name, module in JOBS.items():
        module.configure(
            jobs.add_parser(name, help=(module.__doc__ or "").splitlines()[0], description=module.__doc__)
        )


def _setting(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value


def run(args: argparse.Namespace) -> int:
    spark = spark_session(args.master, f"artimon-{args.job}", conf=dict(args.conf))
    # raw_ingest's lag: the landing files it has not taken yet (a local landing directory)
    landing = getattr(args, "landing", "")
    collectors = [LandingBacklog(Path(landing))] if args.job == "raw_ingest" and "://" not in landing else []
    metrics = serve_metrics(args, args.job, collectors)
    try:
        return int(JOBS[args.job].run_query(spark, args))
    finally:
        if metrics is not None:
            metrics.stop()
        spark.stop()
