"""One real Prometheus and one Artimon query API for the PromQL tests of the session, both
holding the cross-check dataset (query_dsl.promql.dataset)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from artimon.servers import PrometheusServer, create_blocks
from bookkeeper.ground import BackgroundServer
from query_dsl import Limits, create_app
from query_dsl.promql.dataset import Series, generate, write_openmetrics
from query_dsl.testing import load_store
from vhms import LocalClient
from vhms.server import Store


@dataclass(frozen=True)
class Dataset:
    series: list[Series]
    start_s: int  # the first sample's time
    end_s: int  # the last sample's time


@pytest.fixture(scope="session")
def promql_dataset() -> Dataset:
    series = generate(int(time.time()) // 60 * 60 - 120)
    first = min(int(s.times_ms[0]) for s in series) // 1000
    last = max(int(s.times_ms[-1]) for s in series) // 1000
    return Dataset(series, first, last)


@pytest.fixture(scope="session")
def prometheus(
    tmp_path_factory: pytest.TempPathFactory, promql_dataset: Dataset
) -> Iterator[PrometheusServer]:
    home: Path = tmp_path_factory.mktemp("prometheus")
    server = PrometheusServer(home)
    create_blocks(write_openmetrics(promql_dataset.series, home / "data.om"), server.tsdb_dir)
    with server:
        yield server


@pytest.fixture(scope="session")
def artimon(promql_dataset: Dataset) -> Iterator[BackgroundServer]:
    store = Store("15s:1000")
    load_store(promql_dataset.series, store)
    server = BackgroundServer(create_app(LocalClient(store), limits=Limits(timeout_s=10)), name="promql-api")
    server.start()
    yield server
    server.stop()
