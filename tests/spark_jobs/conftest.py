"""One local SparkSession for the whole test run (a JVM takes about 10 s to start)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from spark_jobs.session import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = spark_session("local[2]", "artimon-tests")
    yield session
    session.stop()
