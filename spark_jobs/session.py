"""The SparkSession every job (and the tests) use: ``local[*]`` by default, the Python
workers on this interpreter (so they see this environment's numpy and pandas), UTC, state
in RocksDB, a driver of ``$ARTIMON_SPARK_DRIVER_MEMORY`` (4g). With a ``local`` master the
driver's RPC and block manager listen on 127.0.0.1 only (Spark's default is the host's
outward address, reachable from the network, and no executor elsewhere needs them); give
``spark.driver.bindAddress`` in ``conf`` to change it. With a cluster master Spark's own
settings apply: executors must reach the driver."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["spark_session"]


def spark_session(master: str = "local[*]", app: str = "artimon", conf: dict[str, str] | None = None) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # deduplication state (every series and time of the watermark) lives on disk, not heap
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        # raw_ingest's rows come sorted by series: a writer per date and hour keeps them so,
        # where a single writer would sort them by date and hour again
        .config("spark.sql.maxConcurrentOutputFileWriters", "4")
        .config("spark.driver.memory", os.environ.get("ARTIMON_SPARK_DRIVER_MEMORY", "4g"))
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config(
            "spark.driver.host", "127.0.0.1"
        )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
