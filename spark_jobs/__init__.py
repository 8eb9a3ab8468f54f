"""Artimon's Spark jobs: raw landing files to Parquet (``raw_ingest``), queries over the
history (``analyze``), VHMS rebuilt from it (``backfill_vhms``), and the session they share
(``spark_session``), whether a history exists (``history_exists``), the report of committed
landing files to the agents' round ledgers (``watch_commits``) and the errors of the jobs.
Loaded when first used: importing pyspark takes seconds. See README.md."""

from __future__ import annotations

import importlib
import typing

from spark_jobs.exceptions import HistoryPathError, SparkJobError
from spark_jobs.history_fs import history_exists

if typing.TYPE_CHECKING:
    from spark_jobs import analyze, backfill_vhms, raw_ingest
    from spark_jobs.ledger_report import watch_commits
    from spark_jobs.session import spark_session

__all__ = [
    "HistoryPathError",
    "SparkJobError",
    "analyze",
    "backfill_vhms",
    "history_exists",
    "raw_ingest",
    "spark_session",
    "watch_commits",
]

_JOBS = {"analyze", "backfill_vhms", "raw_ingest"}


def __getattr__(name: str) -> typing.Any:
    if name in _JOBS:
        return importlib.import_module(f"spark_jobs.{name}")
    if name == "spark_session":
        return importlib.import_module("spark_jobs.session").spark_session
    if name == "watch_commits":
        return importlib.import_module("spark_jobs.ledger_report").watch_commits
    raise AttributeError(f"module 'spark_jobs' has no attribute {name!r}")
