"""``kafka`` (``org.apache.flume.sink.kafka.KafkaSink``): events onto a Kafka topic.

A batch sink: up to ``batchSize`` events are taken in one channel transaction and produced;
the transaction commits only once the broker acknowledged every one of them (``acks=all``,
an idempotent producer: a retry after a lost acknowledgement never writes a record twice in
its partition). Any failure rolls the batch back into the channel; a broker that is down or
restarting is waited out by the producer for ``kafka.producer.message.timeout.ms`` (60 s),
then the batch fails and is taken again after the runner's backoff. Records are keyed by the
``key`` header (Flume's) or else the ``artimon.endpoint`` header, so an endpoint's rounds go
to one partition, in order; the Java client's partitioner (murmur2) places them, so Java and
Python producers agree.

Keys: ``kafka.bootstrap.servers`` (required), ``kafka.topic`` (default
``default-flume-topic``), ``batchSize`` (Flume's ``flumeBatchSize`` is read too; default
100), ``useFlumeEventFormat`` (default false: the value is the body, the headers go as
record headers; true: the value is an ``AvroFlumeEvent``), ``kafka.producer.*``
(:mod:`collector_agent.kafka_client`), and the batch sinks' keys (dead letters, pace). A
record the broker refuses for good (larger than ``message.max.bytes``) is refused as
malformed and, after ``deadLetter.maxAttempts``, set aside as a dead letter.
Counted besides Flume's sink counters: ``KafkaEventSendTimer`` (ms spent producing and
waiting for acknowledgements, Flume's ``channel.kafka.event.send.time``) and
``KafkaProduceFailCount`` (records the broker did not acknowledge).
"""

from __future__ import annotations

import time

from confluent_kafka import Producer

from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import EventDeliveryException, MalformedEventError
from collector_agent.kafka_client import new_producer, producer_config, send_and_wait
from collector_agent.sinks.base import BatchSink

__all__ = ["KafkaSink"]


class KafkaSink(BatchSink):
    counter_names = (*BatchSink.counter_names, "KafkaEventSendTimer", "KafkaProduceFailCount")

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._producer: Producer | None = None

    def configure(self, context: Context) -> None:
        super().configure(context)
        if "batchSize" not in context:
            self.batch_size = context.get_int("flumeBatchSize", 100, minimum=1)
        self.topic = context.get_str("kafka.topic", "default-flume-topic")
        self.flume_format = context.get_bool("useFlumeEventFormat", False)
        self.settings = producer_config(context, f"artimon-sink-{self.name}")
        self.send_timeout = int(self.settings["message.timeout.ms"]) / 1000 + 5

    def start(self) -> None:
        self._producer = new_producer(self.settings, f"sink {self.name}")
        self.counters.add("ConnectionCreatedCount")
        super().start()

    def stop(self) -> None:
        super().stop()
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(5)  # records of a batch that rolled back: they are in the channel too
            self.counters.add("ConnectionClosedCount")

    def deliver(self, events: list[Event]) -> None:
        producer = self._producer
        if producer is None:
            raise EventDeliveryException(f"sink {self.name} is not started")
        started = time.monotonic()
        outcome = send_and_wait(producer, self.topic, events, self.flume_format, self.send_timeout)
        self.counters.add("KafkaEventSendTimer", int((time.monotonic() - started) * 1000))
        if outcome.ok:
            return
        self.counters.add("KafkaProduceFailCount", len(outcome.failed) + outcome.unacknowledged)
        problem = f"topic {self.topic}: {outcome.describe(len(events))}"
        if outcome.retriable:
            raise EventDeliveryException(problem)
        raise MalformedEventError(problem, outcome.refused)
