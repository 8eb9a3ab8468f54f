"""Run a Spark job (``raw_ingest``, ``analyze``, ``backfill_vhms``) with ``--master``
(default ``local[*]``; ``spark://HOST:PORT`` for a standalone cluster) and any Spark
setting as ``--conf KEY=VALUE``, as spark-submit takes them."""

from __future__ import annotations

import argparse

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
    try:
        return int(JOBS[args.job].run_query(spark, args))
    finally:
        spark.stop()
