"""The agents of a site's topology, as properties text (Flume's format, docs/agent.md) with
the site's addresses written in: what an operator would put on each machine.

- :func:`polling_agent`: on an app host, the ``artimon`` source of agent group ``group``
  (the group's members share the endpoints registered in ZooKeeper; one lost, its endpoints
  go to the others) into a durable file channel, published onto the Kafka topic by the
  ``kafka`` sink (``acks=all``, an idempotent producer: with ``min.insync.replicas=2``, a
  round is acknowledged once two brokers hold it).
- :func:`store_agent`: a ``kafka`` source of the consumer group ``artimon-vhms`` (the store
  agents share the topic's partitions) into a durable file channel, drained by the ``vhms``
  sink into every member of each shard found in ZooKeeper.
"""

from __future__ import annotations

from pathlib import Path

from artimon.stack import KAFKA_TOPIC, agent_properties

__all__ = ["STORE_GROUP", "polling_agent", "store_agent"]

STORE_GROUP = "artimon-vhms"  # the store agents' Kafka consumer group


def _durable(directory: Path, name: str) -> dict[str, object]:
    return {
        "type": "file",
        "dataDirs": str(directory.resolve() / "channels" / name),
        "minimumRequiredSpace": 104857600,
        "deadLetter.dir": str(directory.resolve() / "dead-letter"),
    }


def polling_agent(zk: str, kafka: str, directory: Path, group: str, agent_id: str, interval: float) -> str:
    """Agent ``poll`` of an app host (see the module doc), its files under ``directory``."""
    return agent_properties(
        "poll",
        sources={
            "endpoints": {
                "type": "artimon",
                "zk": zk,
                "interval": f"{interval:g}",
                "group": group,
                "agentId": agent_id,
                "channels": "durable",
            }
        },
        channels={"durable": _durable(directory, "durable")},
        sinks={
            "publish": {
                "type": "kafka",
                "channel": "durable",
                "kafka.bootstrap.servers": kafka,
                "kafka.topic": KAFKA_TOPIC,
                "batchSize": 1000,
                "maxBackoffSleep": 1000,
                "deadLetter.dir": str(directory.resolve() / "dead-letter"),
            }
        },
        comment=f"The polling agent {agent_id} of group {group}: endpoints -> durable channel -> Kafka.\n",
    )


def store_agent(zk: str, kafka: str, directory: Path) -> str:
    """Agent ``store`` (see the module doc), its files under ``directory``."""
    return agent_properties(
        "store",
        sources={
            "samples": {
                "type": "kafka",
                "channels": "durable",
                "kafka.bootstrap.servers": kafka,
                "kafka.topics": KAFKA_TOPIC,
                "kafka.consumer.group.id": STORE_GROUP,
                "batchDurationMillis": 200,
                "deadLetter.dir": str(directory.resolve() / "dead-letter"),
            }
        },
        channels={"durable": _durable(directory, "durable")},
        sinks={
            "store": {
                "type": "vhms",
                "channel": "durable",
                "zk": zk,
                "batchSize": 1000,
                "maxBackoffSleep": 1000,
                "deadLetter.dir": str(directory.resolve() / "dead-letter"),
            }
        },
        comment=f"A store agent: Kafka (consumer group {STORE_GROUP}) -> durable channel -> VHMS.\n",
    )
