"""Interop with Apache Kafka's own tools: a record written by Kafka's console producer is
read by our Kafka source, and records written by our Kafka sink are read by Kafka's console
consumer, headers and key included."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kafka_helpers import drain, kafka_source, memory_channel, publish, run_until

from artimon.servers import KafkaCluster, kafka_tool_command
from collector_agent import Event


def test_kafka_console_producer_to_our_source(kafka: KafkaCluster, topic: str, tmp_path: Path) -> None:
    lines = "10.0.0.1:9000:u1|a line from Kafka's console producer\n10.0.0.2:9000:u2|and a second one\n"
    command = kafka_tool_command(
        "org.apache.kafka.tools.ConsoleProducer",
        "--bootstrap-server",
        kafka.bootstrap_servers,
        "--topic",
        topic,
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=|",
    )
    done = subprocess.run(command, input=lines, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]

    channel = memory_channel()
    source = kafka_source(kafka, topic, channel, tmp_path)
    got: list[Event] = []
    try:
        run_until(
            lambda: (source.process(), got.extend(drain(channel)))[0], lambda: len(got) >= 2, 60, "both"
        )
    finally:
        source.stop()
    assert {(e.headers["key"], e.body) for e in got} == {
        ("10.0.0.1:9000:u1", b"a line from Kafka's console producer"),
        ("10.0.0.2:9000:u2", b"and a second one"),
    }
    assert all(e.headers["topic"] == topic for e in got)


def test_our_sink_to_kafka_console_consumer(kafka: KafkaCluster, topic: str) -> None:
    events = [
        Event({"artimon.endpoint": f"10.0.0.{n}:9000:u{n}", "kind": "interop"}, f"event {n}".encode())
        for n in range(3)
    ]
    publish(kafka, topic, events)
    command = kafka_tool_command(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "--bootstrap-server",
        kafka.bootstrap_servers,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        str(len(events)),
        "--timeout-ms",
        "60000",
        "--property",
        "print.key=true",
        "--property",
        "print.headers=true",
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    printed = sorted(done.stdout.strip().splitlines())
    assert printed == [
        f"artimon.endpoint:10.0.0.{n}:9000:u{n},kind:interop\t10.0.0.{n}:9000:u{n}\tevent {n}"
        for n in range(3)
    ]
