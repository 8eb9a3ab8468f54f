"""Kafka client settings from Flume's keys, for librdkafka (confluent-kafka).

``kafka.bootstrap.servers`` is required. ``kafka.producer.*`` and ``kafka.consumer.*`` pass
through to librdkafka, which shares the Java client's names for what matters here
(``linger.ms``, ``compression.type``, ``security.protocol``, ``ssl.*``, ``sasl.*``,
``session.timeout.ms``, ``fetch.max.bytes``...); a name librdkafka does not know is a
``ConfigurationError`` naming the key. The Java client's serializer keys
(``key.serializer``...) are accepted and ignored: records are bytes in and bytes out here.

What the guarantees rest on is fixed, and another value is refused rather than obeyed:

- producers: ``acks=all`` and ``enable.idempotence=true`` (a take commits only what every
  in-sync replica holds, and a retry never writes a record twice in a partition);
- consumers: ``enable.auto.commit=false`` and ``enable.auto.offset.store=false`` (an offset
  is committed only once the events are committed in the channel).

Defaults that differ from librdkafka's: ``partitioner=murmur2_random`` (the Java client's
partitioner: a key lands in the same partition whichever client wrote it),
``queue.buffering.max.kbytes=65536`` (memory bounded: 64 MiB of records waiting for the
broker, as the Java client's ``buffer.memory`` bounds it), ``message.timeout.ms=60000`` (a
broker restart is waited out, not turned into a failed batch), ``auto.offset.reset=earliest``
(a new group starts at the beginning of the topic: nothing produced before it is skipped),
``fetch.queue.backoff.ms=10`` (librdkafka's 1000 stops fetching for a second each time its
prefetch queue is full, and a consumer that keeps up then waits on an empty queue: the Kafka
channel's takes went from 53K to 130K events/s).
librdkafka's own log lines go to the ``collector_agent.kafka`` logger.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer

from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ConfigurationError
from collector_agent.kafka_records import record_from_event

__all__ = [
    "PERMANENT_ERRORS",
    "SendOutcome",
    "consumer_config",
    "endpoint_key",
    "new_consumer",
    "new_producer",
    "producer_config",
    "send_and_wait",
]

log = logging.getLogger("collector_agent.kafka")

_JAVA_ONLY = frozenset(
    {"key.serializer", "value.serializer", "key.deserializer", "value.deserializer", "buffer.memory"}
)
_PRODUCER_FIXED = {"acks": "all", "enable.idempotence": "true"}
_PRODUCER_DEFAULTS = {
    "partitioner": "murmur2_random",
    "queue.buffering.max.kbytes": "65536",
    "message.timeout.ms": "60000",
    "linger.ms": "5",
}
_CONSUMER_FIXED = {"enable.auto.commit": "false", "enable.auto.offset.store": "false"}
_CONSUMER_DEFAULTS = {"auto.offset.reset": "earliest", "fetch.queue.backoff.ms": "10"}
_EQUIVALENT = {"-1": "all", "all": "all", "true": "true", "false": "false"}


def _passed_through(context: Context, section: str, fixed: dict[str, str]) -> dict[str, str]:
    own = context.subset(f"kafka.{section}")
    settings: dict[str, str] = {}
    for key, value in own.values.items():
        if key in _JAVA_ONLY:
            continue
        wanted = fixed.get(key)
        if wanted is not None and _EQUIVALENT.get(value.strip().lower()) != wanted:
            raise context.error(
                f"kafka.{section}.{key}",
                f"{value!r} would weaken delivery: the Kafka components need {key}={wanted}",
            )
        settings[key] = value
    return settings


def _common(context: Context, client_id: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": context.get_str("kafka.bootstrap.servers"),
        "client.id": client_id,
        "logger": log,
    }


def producer_config(context: Context, client_id: str) -> dict[str, Any]:
    """The producer's librdkafka settings (see the module doc)."""
    settings = _common(context, client_id)
    settings.update(_PRODUCER_DEFAULTS)
    settings.update(_passed_through(context, "producer", _PRODUCER_FIXED))
    settings.update(_PRODUCER_FIXED)
    return settings


def consumer_config(context: Context, client_id: str, default_group: str = "flume") -> dict[str, Any]:
    """The consumer's librdkafka settings; ``kafka.consumer.group.id`` (Flume's default
    ``flume``) names the group."""
    settings = _common(context, client_id)
    settings.update(_CONSUMER_DEFAULTS)
    settings.update(_passed_through(context, "consumer", _CONSUMER_FIXED))
    settings.setdefault("group.id", default_group)
    settings.update(_CONSUMER_FIXED)
    return settings


def _refused(component: str, exc: KafkaException) -> ConfigurationError:
    return ConfigurationError(f"{component}: librdkafka refused the Kafka settings: {exc.args[0]}")


def new_producer(settings: dict[str, Any], component: str) -> Producer:
    """A producer, or ``ConfigurationError`` naming what librdkafka refused."""
    try:
        return Producer(settings)
    except KafkaException as exc:
        raise _refused(component, exc) from None


def new_consumer(settings: dict[str, Any], component: str) -> Consumer:
    """A consumer, or ``ConfigurationError`` naming what librdkafka refused."""
    try:
        return Consumer(settings)
    except KafkaException as exc:
        raise _refused(component, exc) from None


# Refusals that no retry can cure: the record itself is the problem.
PERMANENT_ERRORS = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_RECORD})


def endpoint_key(event: Event) -> str | None:
    """The record key of ``event``: Flume's ``key`` header, else the Artimon endpoint, so an
    endpoint's rounds stay in one partition, in order."""
    return event.headers.get("key") or event.headers.get("artimon.endpoint")


@dataclass
class SendOutcome:
    """What became of a batch: positions the client or broker refused for good, positions
    that failed otherwise (with the first error), records still unacknowledged at the
    deadline."""

    refused: list[int] = field(default_factory=list)
    failed: dict[int, KafkaError] = field(default_factory=dict)
    unacknowledged: int = 0

    @property
    def ok(self) -> bool:
        return not (self.refused or self.failed or self.unacknowledged)

    @property
    def retriable(self) -> bool:
        """Whether a failure could pass on a retry (not only records refused for good)."""
        return bool(
            self.unacknowledged or any(e.code() not in PERMANENT_ERRORS for e in self.failed.values())
        )

    def describe(self, total: int) -> str:
        if self.unacknowledged:
            return f"{self.unacknowledged} of {total} records not acknowledged in time"
        errors = {e.str() for e in self.failed.values()}
        return (
            f"{len(self.failed) + len(self.refused)} of {total} records failed: {'; '.join(sorted(errors))}"
        )


def send_and_wait(
    producer: Producer, topic: str, events: Sequence[Event], flume_format: bool, timeout: float
) -> SendOutcome:
    """Produce ``events`` to ``topic`` and wait (``timeout`` s at most) until the broker
    acknowledged or refused each one; a full producer queue is waited on, within the same
    deadline."""
    outcome = SendOutcome()
    deadline = time.monotonic() + timeout

    def acknowledged(position: int) -> Any:
        def callback(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                if error.code() in PERMANENT_ERRORS:
                    outcome.refused.append(position)
                else:
                    outcome.failed[position] = error

        return callback

    for position, event in enumerate(events):
        value, headers = record_from_event(event, flume_format)
        while True:
            try:
                producer.produce(
                    topic, value, endpoint_key(event), headers=headers, on_delivery=acknowledged(position)
                )
                break
            except BufferError:  # the bounded queue is full: let the broker drain it
                if time.monotonic() > deadline:
                    outcome.unacknowledged = len(events) - position
                    break
                producer.poll(0.05)
            except KafkaException as exc:
                if exc.args[0].code() not in PERMANENT_ERRORS:
                    raise
                outcome.refused.append(position)
                break
        if outcome.unacknowledged:
            break
    outcome.unacknowledged += producer.flush(max(0.0, deadline - time.monotonic()))
    return outcome
