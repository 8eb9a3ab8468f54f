"""Harnesses as code: a real ZooKeeper server, test applications in their own processes, and
the demo applications of ``artimon up --demo``. Tests, benchmarks and users share them."""

from __future__ import annotations

from bookkeeper.testing.apps import AppProcess, expire_session, formula_value, populate, start_app
from bookkeeper.testing.demo import DemoApps
from bookkeeper.testing.zkserver import ZooKeeperServer, four_letter_word, free_port, pyspark_jars

__all__ = [
    "AppProcess",
    "DemoApps",
    "ZooKeeperServer",
    "expire_session",
    "formula_value",
    "four_letter_word",
    "free_port",
    "populate",
    "pyspark_jars",
    "start_app",
]
