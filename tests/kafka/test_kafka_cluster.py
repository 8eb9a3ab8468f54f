"""The KRaft harness: start, answer, kill -9 and restart on the same data, the command."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from artimon.servers import KafkaCluster, free_port
from bookkeeper import DirectoryInUseError


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0


def _read_all(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        total = sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        )
        seen: list[bytes] = []
        while len(seen) < total:
            for message in consumer.consume(total - len(seen), timeout=5):
                assert message.error() is None, message.error()
                seen.append(message.value())
        return seen
    finally:
        consumer.close()


def test_a_cluster_answers_and_keeps_what_it_acknowledged(kafka: KafkaCluster, topic: str) -> None:
    assert kafka.started_in_s < 60 and kafka.pid(0) is not None and kafka.answers(0)
    values = [f"record {i}".encode() for i in range(50)]
    _produce(kafka.bootstrap_servers, topic, values)
    assert sorted(_read_all(kafka.bootstrap_servers, topic, 4)) == sorted(values)


def test_a_second_cluster_on_the_same_directory_is_refused(kafka: KafkaCluster) -> None:
    with pytest.raises(DirectoryInUseError):
        KafkaCluster(kafka.data_dir).start()


def test_a_directory_holds_one_shape_of_cluster(kafka: KafkaCluster) -> None:
    with pytest.raises(ValueError, match="holds a cluster of 1 brokers, not 3"):
        KafkaCluster(kafka.data_dir, brokers=3)


@pytest.mark.slow
def test_kafka_command_serves_until_ctrl_c(tmp_path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "artimon", "kafka", "--port", str(port), "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready.startswith(f"Kafka ready on 127.0.0.1:{port} in "), ready
        cluster = KafkaCluster(tmp_path)  # reads cluster.json: the same ports and id
        assert cluster.answers(0)
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, out
    assert "Kafka stopped." in out
    assert not cluster.answers(0, timeout=0.5)
    assert not (tmp_path / "node-1" / "kafka.pid").exists()  # removed once the broker exited
