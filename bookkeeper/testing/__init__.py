"""Harnesses as code: a real ZooKeeper server, test applications in their own processes, the
demo applications of ``artimon up --demo``, what a process listens on (``listening``) and
process trees (``descendants``, ``running``), a real Prometheus server (``PrometheusServer``,
``create_blocks``) and Alertmanager (``AlertmanagerServer``), a Spark standalone master and
worker (``SparkCluster``), Apache's server jars resolved once with Maven (``resolve_jars``)
and a real single-node HDFS from them (``HdfsServer``). Tests, benchmarks and users share
them."""

from __future__ import annotations

from bookkeeper.testing.alertmanager import AlertmanagerServer
from bookkeeper.testing.apps import AppProcess, expire_session, formula_value, populate, start_app
from bookkeeper.testing.demo import DemoApps
from bookkeeper.testing.hdfs import HADOOP_VERSION, HdfsServer, hadoop_classpath
from bookkeeper.testing.jars import JarResolutionError, jar_cache, resolve_jars
from bookkeeper.testing.kafka import KafkaCluster, kafka_jars, kafka_tool_command
from bookkeeper.testing.processes import descendants, running
from bookkeeper.testing.promserver import PrometheusServer, create_blocks
from bookkeeper.testing.sockets import Listener, listening
from bookkeeper.testing.spark_cluster import SparkCluster
from bookkeeper.testing.zkserver import ZooKeeperServer, four_letter_word, free_port, pyspark_jars

__all__ = [
    "HADOOP_VERSION",
    "AlertmanagerServer",
    "AppProcess",
    "DemoApps",
    "HdfsServer",
    "JarResolutionError",
    "KafkaCluster",
    "Listener",
    "PrometheusServer",
    "SparkCluster",
    "ZooKeeperServer",
    "create_blocks",
    "descendants",
    "expire_session",
    "formula_value",
    "four_letter_word",
    "free_port",
    "hadoop_classpath",
    "jar_cache",
    "kafka_jars",
    "kafka_tool_command",
    "listening",
    "populate",
    "pyspark_jars",
    "resolve_jars",
    "running",
    "start_app",
]
