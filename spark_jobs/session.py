"""The SparkSession every job (and the tests) use: ``local[*]`` by default, the Python
workers on this interpreter (so they see this environment's numpy and pandas), UTC, state
in RocksDB, a driver of ``$ARTIMON_SPARK_DRIVER_MEMORY`` (4g). With a ``local`` master the
driver's RPC and block manager listen on 127.0.0.1 only (Spark's default is the host's
outward address, reachable from the network, and no executor elsewhere needs them;
``$SPARK_LOCAL_IP`` is 127.0.0.1 unless set, so Spark does not look for another); give
``spark.driver.bindAddress`` in ``conf`` to change it. With a cluster master Spark's own
settings apply: executors must reach the driver. With ``log_file``, the JVM and its Python
workers write their output there (the embedded stack's round lines stay readable), Spark
draws no progress bars, and its logging is ``log4j2.properties`` beside this module (a WARN
in the file means something is wrong: the messages known to be harmless are listed there,
each with why)."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["spark_session"]

_LOG4J = Path(__file__).with_name("log4j2.properties")
_PADDING_WARNING = "The behavior of DataFrame concatenation with empty or all-NA entries"


def _on_loopback(master: str) -> bool:
    """Whether every executor of ``master`` runs on this machine."""
    if master.startswith("local"):
        return True
    host = master.removeprefix("spark://").rpartition(":")[0]
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name or several masters: not known to be loopback
        return False


def _settings(master: str, app: str, conf: dict[str, str] | None) -> dict[str, str]:
    return {
        "spark.master": master,
        "spark.app.name": app,
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # deduplication state (every series and time of the watermark) lives on disk, not heap
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        ),
        # raw_ingest's rows come sorted by series: a writer per date and hour keeps them so,
        # where a single writer would sort them by date and hour again
        "spark.sql.maxConcurrentOutputFileWriters": "4",
        "spark.driver.memory": os.environ.get("ARTIMON_SPARK_DRIVER_MEMORY", "4g"),
        # pyspark's own worker pads applyInPandasWithState's output with all-NA rows and
        # concatenates them (pyspark/worker.py), which pandas 2 deprecates with a FutureWarning
        # per batch; the padding is dropped by its count column, the rows are right
        "spark.executorEnv.PYTHONWARNINGS": f"ignore:{_PADDING_WARNING}:FutureWarning",
        **(
            {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
            if _on_loopback(master)
            else {}
        ),
        **(
            {"spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"]}
            if "PYTHONPATH" in os.environ and not master.startswith("local")
            else {}
        ),
        **(conf or {}),
    }


def spark_session(
    master: str = "local[*]",
    app: str = "artimon",
    conf: dict[str, str] | None = None,
    log_file: Path | None = None,
) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    settings = _settings(master, app, conf)
    if _on_loopback(master):  # Spark's own address, and no warning that the host name is loopback
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if log_file is None:
        builder = SparkSession.builder
        for key, value in settings.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    settings["spark.ui.showConsoleProgress"] = "false"
    # Spark's defaults at WARN and the known-harmless messages listed (and why) in the file
    java_options = f"-Dlog4j2.configurationFile={_LOG4J} {settings.get('spark.driver.extraJavaOptions', '')}"
    settings["spark.driver.extraJavaOptions"] = java_options.strip()
    spark_conf = SparkConf().setAll(list(settings.items()))
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as output:  # the JVM keeps its own descriptor of the file
        gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": output, "stderr": subprocess.STDOUT})  # type: ignore[no-untyped-call]
    return SparkSession(SparkContext(conf=spark_conf, gateway=gateway))
