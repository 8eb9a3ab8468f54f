"""Artimon's Spark jobs: raw landing files to Parquet (``raw_ingest``), queries over the
history (``analyze``), VHMS rebuilt from it (``backfill_vhms``), and the session they share
(``spark_session``), whether a history exists (``history_exists``) and the errors of the jobs.
Loaded when first used: importing pyspark takes seconds. See README.md."""

from __future__ import annotations

import importlib
import typing

from spark_jobs.exceptions import HistoryPathError, SparkJobError
from spark_jobs.history_fs import history_exists

if typing.TYPE_CHECKING:
    from spark_jobs import analyze, backfill_vhms, raw_ingest
    from spark_jobs.session import spark_session

__all__ = [
    "HistoryPathError",
    "SparkJobError",
    "analyze",
    "backfill_vhms",
    "history_exists",
    "raw_ingest",
    "spark_session",
]

_JOBS = {"analyze", "backfill_vhms", "raw_ingest"}


def __getattr__(name: str) -> typing.Any:
    if name in _JOBS:
        return importlib.import_module(f"spark_jobs.{name}")
    if name == "spark_session":
        return importlib.import_module("spark_jobs.session").spark_session
    raise AttributeError(f"module 'spark_jobs' has no attribute {name!r}")
