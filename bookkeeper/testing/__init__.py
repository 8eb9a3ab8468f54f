"""Harnesses as code: a real ZooKeeper server, test applications in their own processes, the
demo applications of ``artimon up --demo``, what a process listens on (``listening``) and
process trees (``descendants``, ``running``), and Apache's server jars resolved once with Maven
(``resolve_jars``). Tests, benchmarks and users share them."""

from __future__ import annotations

from bookkeeper.testing.apps import AppProcess, expire_session, formula_value, populate, start_app
from bookkeeper.testing.demo import DemoApps
from bookkeeper.testing.jars import JarResolutionError, jar_cache, resolve_jars
from bookkeeper.testing.kafka import KafkaCluster, kafka_jars, kafka_tool_command
from bookkeeper.testing.processes import descendants, running
from bookkeeper.testing.sockets import Listener, listening
from bookkeeper.testing.zkserver import ZooKeeperServer, four_letter_word, free_port, pyspark_jars

__all__ = [
    "AppProcess",
    "DemoApps",
    "JarResolutionError",
    "KafkaCluster",
    "Listener",
    "ZooKeeperServer",
    "descendants",
    "expire_session",
    "formula_value",
    "four_letter_word",
    "free_port",
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
