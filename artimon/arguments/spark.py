"""``artimon spark``'s arguments; the command itself: ``artimon/commands/spark.py``. A job's
own arguments are its module's ``configure`` (``spark_jobs/<job>.py``), read when that job
is chosen: the job's module imports pyspark."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import spark_jobs
from artimon.arguments import LazyParser, module_doc
from artimon.arguments._metrics import add_metrics_arguments

__all__ = ["JOBS", "JOB_EXAMPLES", "add_arguments"]

JOBS = ("raw_ingest", "analyze", "backfill_vhms")  # modules of spark_jobs
JOB_EXAMPLES = {
    "raw_ingest": "artimon spark raw_ingest --landing artimon-data/landing "
    "--output file:///srv/history/parquet --checkpoint file:///srv/history/checkpoint\n"
    "  artimon spark raw_ingest --kafka 127.0.0.1:9092 --topic artimon-samples "
    "--output file:///srv/history/parquet --checkpoint file:///srv/history/checkpoint",
    "analyze": "artimon spark analyze --input file:///srv/history/parquet --query 'fetch(\"hits\")' "
    "--start 2026-11-01 --end 2026-11-02 --output out --format csv",
    "backfill_vhms": "artimon spark backfill_vhms --input file:///srv/history/parquet --zk 127.0.0.1:2181 "
    "--start 2026-11-01 --end 2026-11-02",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
    jobs = parser.add_subparsers(dest="job", metavar="<job>", required=True, parser_class=LazyParser)
    for name in JOBS:
        doc = module_doc(f"spark_jobs.{name}")
        jobs.add_parser(
            name,
            help=doc.splitlines()[0],
            description=doc,
            epilog=f"example:\n  {JOB_EXAMPLES[name]}",
            fill=_job_arguments(name),
        )


def _job_arguments(name: str) -> Callable[[argparse.ArgumentParser], None]:
    def fill(parser: argparse.ArgumentParser) -> None:
        getattr(spark_jobs, name).configure(parser)

    return fill


def _setting(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key.strip(), value
