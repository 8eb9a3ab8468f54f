"""The site's raw history: Spark's ``raw_ingest --kafka`` (``spark_jobs/raw_ingest.py``) as
a site component, what an operator would run on the driver's machine.

:func:`history_job` is its launcher (a :class:`~artimon.servers.SparkJobServer`): the
driver on its host, binding that host's address; its executors on the site's Spark
standalone cluster (one executor of one core, the heap a worker offers: a site's few
thousand samples a round need no more); reading the agents' topic
:data:`~artimon.stack.KAFKA_TOPIC` with Spark's own Kafka source (offsets in its
checkpoint, no consumer group); writing the Parquet history under
``<HDFS>/artimon/history/parquet`` and its checkpoint under ``.../checkpoint`` on the
site's HDFS (:data:`HISTORY_ROOT`), a micro-batch every ``interval``. The checkpoint makes
it exactly-once: killed and started again (``Site.kill`` / ``restart``), the job goes on
from its last committed micro-batch; while HDFS is unavailable it starts its query again
from there by itself (``raw_ingest``'s ``--max-retries``), and a broker lost is the Kafka
source's to ride out.
"""

from __future__ import annotations

from pathlib import Path

from artimon.servers import HdfsServer, KafkaCluster, SparkCluster, SparkJobServer
from artimon.site.hosts import Host
from artimon.stack import KAFKA_TOPIC

__all__ = ["HISTORY_ROOT", "history_job"]

HISTORY_ROOT = "/artimon/history"  # on the site's HDFS: parquet/ and checkpoint/ under it


def history_job(
    directory: Path,
    host: Host,
    spark: SparkCluster,
    kafka: KafkaCluster,
    hdfs: HdfsServer,
    interval: str,
) -> SparkJobServer:
    """``raw_ingest --kafka`` with its driver on ``host`` (see the module doc), its log
    under ``directory``."""
    root = f"{hdfs.uri}{HISTORY_ROOT}"
    # JVMs of a site on one machine: quick start and a small footprint over peak speed
    small_jvm = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    conf = {
        "spark.driver.memory": "512m",
        "spark.driver.extraJavaOptions": small_jvm,
        "spark.executor.extraJavaOptions": small_jvm,
        "spark.executor.memory": spark.worker_memory,  # all a worker offers: one executor fits
        "spark.cores.max": "1",
        "spark.sql.shuffle.partitions": "2",  # the dedupe's state stores, each a task a batch
        "spark.sql.adaptive.enabled": "false",  # it does not apply to a stream: a warning a start
        "spark.ui.showConsoleProgress": "false",  # no progress bars in its log
        **{f"spark.hadoop.{key}": value for key, value in hdfs.client_conf.items()},
    }
    arguments = [
        *("--kafka", kafka.bootstrap_servers, "--topic", KAFKA_TOPIC),
        *("--output", f"{root}/parquet", "--checkpoint", f"{root}/checkpoint", "--interval", interval),
    ]
    return SparkJobServer(directory, spark.master_url, "raw_ingest", arguments, conf=conf, host=host)
