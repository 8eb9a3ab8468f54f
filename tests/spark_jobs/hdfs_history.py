"""Where a Spark test's history lives: on the session's HDFS (a root per test) or, with
``ARTIMON_TEST_HISTORY=file``, under a local directory (``artimon up``'s ``file://`` default).
A module of its own (not the conftest) so test modules can import it by a unique name."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from artimon.servers import HdfsServer


@dataclass(frozen=True)
class History:
    """A test's history root: ``hdfs://127.0.0.1:<port>/tests/<id>`` or ``file://<tmp>``."""

    root: str

    def uri(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def read(self, spark: Any, relative: str) -> pd.DataFrame:
        """The Parquet under ``relative`` as Spark reads it: only the files of committed
        batches (its ``_spark_metadata`` log), whatever a killed batch left beside them."""
        return spark.read.parquet(self.uri(relative)).toPandas()

    def children(self, spark: Any, relative: str) -> list[str]:
        """The names in a directory (``[]`` while it does not exist), through Hadoop's API."""
        jvm, conf = spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()
        path = jvm.org.apache.hadoop.fs.Path(self.uri(relative))
        fs = path.getFileSystem(conf)
        return [status.getPath().getName() for status in fs.listStatus(path)] if fs.exists(path) else []

    def copy_to_local(self, spark: Any, relative: str, local: Path) -> Path:
        """A local copy of a directory, for tools that read files (pyarrow's metadata)."""
        jvm, conf = spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()
        path = jvm.org.apache.hadoop.fs.Path(self.uri(relative))
        path.getFileSystem(conf).copyToLocalFile(path, jvm.org.apache.hadoop.fs.Path(f"file://{local}"))
        return local


def use_client_conf(spark: Any, server: HdfsServer) -> None:
    """Give the shared session's Hadoop client this HDFS's client settings (the session
    started before the server, so without its ``HADOOP_CONF_DIR``)."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in server.client_conf.items():
        conf.set(key, value)


def new_history(request: pytest.FixtureRequest, local: Path) -> History:
    """A fresh root: on the session's HDFS, or under ``local`` with ``ARTIMON_TEST_HISTORY=file``."""
    if os.environ.get("ARTIMON_TEST_HISTORY", "hdfs") == "file":
        return History(f"file://{local}/history")
    server: HdfsServer = request.getfixturevalue("hdfs")
    return History(f"{server.uri}/tests/{uuid.uuid4().hex[:12]}")
