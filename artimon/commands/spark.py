"""Run a Spark job (``raw_ingest``, ``analyze``, ``backfill_vhms``) with ``--master``
(default ``local[*]``)."""

from __future__ import annotations

import argparse

from spark_jobs import analyze, backfill_vhms, raw_ingest, spark_session

JOBS = {"raw_ingest": raw_ingest, "analyze": analyze, "backfill_vhms": backfill_vhms}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    jobs = parser.add_subparsers(dest="job", metavar="<job>", required=True)
    for name, module in JOBS.items():
        module.configure(
            jobs.add_parser(name, help=(module.__doc__ or "").splitlines()[0], description=module.__doc__)
        )


def run(args: argparse.Namespace) -> int:
    spark = spark_session(args.master, f"artimon-{args.job}")
    try:
        return int(JOBS[args.job].run_query(spark, args))
    finally:
        spark.stop()
