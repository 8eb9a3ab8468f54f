"""One real single-node Kafka cluster (KRaft) for every test of this directory, started by the
first test that asks (about 3 s), and a fresh topic per test so that tests never see each
other's records. The three-node cluster of the fault test starts its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from artimon.servers import KafkaCluster


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(Path(tmp_path_factory.mktemp("kafka")), partitions=4)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def topic(kafka: KafkaCluster) -> str:
    """A new topic of four partitions."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    kafka.create_topic(name, 4)
    return name
