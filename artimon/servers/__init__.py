"""Launchers of real servers, product code of the ``artimon`` command (``artimon zk``,
``hdfs``, ``kafka``, ``up``) that tests and benchmarks share: ZooKeeper from the pyspark
wheel (``ZooKeeperServer``, an ensemble of them: ``ZooKeeperEnsemble``), a single-node
HDFS (``HdfsServer``), a Kafka cluster in KRaft mode (``KafkaCluster``), a Spark standalone
master and worker (``SparkCluster``) and Spark's Kafka connector (``spark_kafka_conf``),
Prometheus (``PrometheusServer``, ``create_blocks``),
Alertmanager (``AlertmanagerServer``) and an Apache Flume agent (``FlumeAgent``), with
Apache's server jars resolved once with Maven (``resolve_jars``); Artimon's own processes
(``VhmsShard``, ``QueryApiServer``, ``AgentServer``, a Spark job's driver ``SparkJobServer``,
and any ``CommandServer``). Each process
runs on a ``Placement`` (``host=``): an address here (``Local``) or a site's host. Each process stands on one
base, ``ServerProcess``: started on a data directory it holds, awaited until ready, stopped
by its PID, killed for a simulated crash, restarted on the same data; a server of several is
a ``ServerGroup`` of them, with the same lifecycle from their one base, ``Launcher``. See
README.md."""

from __future__ import annotations

from artimon.servers.alertmanager import AlertmanagerServer
from artimon.servers.base import (
    LOCAL,
    Launcher,
    Local,
    Placement,
    ServerGroup,
    ServerProcess,
    Where,
    answers_ok,
    free_port,
    placed,
    wait_ready,
)
from artimon.servers.flume import FLUME_ARTIFACTS, FLUME_JAR_SET, FlumeAgent, flume_jars
from artimon.servers.hdfs import HADOOP_VERSION, HdfsServer, hadoop_classpath
from artimon.servers.jars import JarResolutionError, jar_cache, resolve_jars
from artimon.servers.kafka import KafkaCluster, kafka_jars, kafka_tool_command
from artimon.servers.own import AgentServer, CommandServer, QueryApiServer, SparkJobServer, VhmsShard
from artimon.servers.prometheus import PrometheusServer, create_blocks
from artimon.servers.spark import SparkCluster
from artimon.servers.spark_kafka import (
    SPARK_KAFKA_ARTIFACTS,
    SPARK_KAFKA_JAR_SET,
    spark_kafka_conf,
    spark_kafka_jars,
)
from artimon.servers.zookeeper import (
    QUORUM_PORTS,
    ZooKeeperEnsemble,
    ZooKeeperServer,
    four_letter_word,
    pyspark_jars,
)

__all__ = [
    "FLUME_ARTIFACTS",
    "FLUME_JAR_SET",
    "HADOOP_VERSION",
    "LOCAL",
    "QUORUM_PORTS",
    "SPARK_KAFKA_ARTIFACTS",
    "SPARK_KAFKA_JAR_SET",
    "AgentServer",
    "AlertmanagerServer",
    "CommandServer",
    "FlumeAgent",
    "HdfsServer",
    "JarResolutionError",
    "KafkaCluster",
    "Launcher",
    "Local",
    "Placement",
    "PrometheusServer",
    "QueryApiServer",
    "ServerGroup",
    "ServerProcess",
    "SparkCluster",
    "SparkJobServer",
    "VhmsShard",
    "Where",
    "ZooKeeperEnsemble",
    "ZooKeeperServer",
    "answers_ok",
    "create_blocks",
    "flume_jars",
    "four_letter_word",
    "free_port",
    "hadoop_classpath",
    "jar_cache",
    "kafka_jars",
    "kafka_tool_command",
    "placed",
    "pyspark_jars",
    "resolve_jars",
    "spark_kafka_conf",
    "spark_kafka_jars",
    "wait_ready",
]
