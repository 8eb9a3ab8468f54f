"""``kafka`` (``org.apache.flume.channel.kafka.KafkaChannel``): the topic is the channel.

As Flume's KafkaChannel: a put produces, a take consumes, a commit commits. The puts of a
transaction are produced at ``prepare`` (what a commit does first), which returns only once
the broker acknowledged every record (``acks=all``, idempotent producer), so a committed put
is in every in-sync replica; a failure raises ``ChannelException`` and the source keeps the
events. Each thread that takes (a sink's runner) has its own consumer in the group
``kafka.consumer.group.id``; a take reads up to the transaction's room within
``kafka.pollTimeout``, and the take's commit commits the offsets after what it took: an
event leaves the channel only when its sink delivered it. A rollback of takes seeks back to
the first offset taken, so the same events are taken again. A put that was produced cannot
be taken back from the topic: rolled back after ``prepare`` (another channel of the same
put failed), its records stay, and the next hop sees them twice at worst (the stores are
idempotent). Offsets of partitions that a rebalance moved away meanwhile are not committed:
their next owner takes those events again.

The channel works with a source (agents put into it) and without one (another producer,
our Kafka sink or a Flume agent, writes the topic; set ``parseAsFlumeEvent`` to match what
it writes), and with no sink (an agent that only feeds the topic).

A record that is not an event (:mod:`collector_agent.kafka_records`) is counted
(``ForeignRecordCount``), written to ``deadLetter.dir`` (fsynced) during the take, and
committed past with it: the partition keeps flowing.

Keys: ``kafka.bootstrap.servers`` (required), ``kafka.topic`` (``flume-channel``),
``kafka.consumer.group.id`` (``flume``), ``parseAsFlumeEvent`` (true: records are
``AvroFlumeEvent``; false: the value is the body, headers ride as record headers),
``kafka.pollTimeout`` (ms, 500), ``transactionCapacity`` (1000), ``keep-alive`` (s a put
waits on a full producer queue, 3), ``deadLetter.dir`` (``artimon-data/dead-letter``),
``kafka.producer.*``, ``kafka.consumer.*`` (:mod:`collector_agent.kafka_client`).
``ChannelSize`` is the consumers' lag (records behind the end of their partitions, as last
fetched); ``ChannelCapacity`` is 0: the topic's retention, not a count, bounds it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from collector_agent.channels.base import BasicChannel, PutGroup, Transaction
from collector_agent.context import Context
from collector_agent.dead_letters import write_dead_letters
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException, ForeignRecordError
from collector_agent.kafka_client import (
    consumer_config,
    new_consumer,
    new_producer,
    producer_config,
    send_and_wait,
)
from collector_agent.kafka_records import event_from_record

__all__ = ["KafkaChannel"]

log = logging.getLogger(__name__)

_Partition = tuple[str, int]


class _KafkaTransaction(Transaction):
    channel: KafkaChannel

    def __init__(self, channel: KafkaChannel) -> None:
        super().__init__(channel)
        self._puts: list[Event] = []
        self._produced = False
        self._taken = 0
        self._first: dict[_Partition, int] = {}
        self._next: dict[_Partition, int] = {}

    def _do_put(self, events: Sequence[Event]) -> None:
        self._puts.extend(events)

    def _do_take(self, limit: int) -> list[Event]:
        channel = self.channel
        consumer = channel._consumer()
        events: list[Event] = []
        foreign: list[Event] = []
        for message in consumer.consume(limit, timeout=channel.poll_timeout):
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    log.warning("kafka channel %s: %s", channel.name, error.str())
                continue
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if topic is None or partition is None or offset is None:
                continue
            self._first.setdefault((topic, partition), offset)
            self._next[(topic, partition)] = offset + 1
            try:
                events.append(event_from_record(message.value(), message.headers(), channel.flume_format))
            except ForeignRecordError as exc:
                where = {"topic": topic, "partition": str(partition), "offset": str(offset)}
                foreign.append(Event({**where, "reason": str(exc)}, message.value() or b""))
        if foreign:
            try:
                write_dead_letters(channel.dead_letter_dir, channel.name, foreign, role="channel")
            except OSError as exc:
                raise ChannelException(f"channel {channel.name}: dead letters not written: {exc}") from exc
            channel.counters.add("ForeignRecordCount", len(foreign))
            channel.counters.add("DeadLetterCount", len(foreign))
        channel._note_lag(consumer)
        self._taken += len(events)
        return events

    def _do_prepare(self, group: PutGroup | None) -> None:
        if not self._puts or self._produced:
            return
        channel = self.channel
        outcome = send_and_wait(
            channel._producer(), channel.topic, self._puts, channel.flume_format, channel.send_timeout
        )
        if not outcome.ok:
            channel.counters.add("KafkaProduceFailCount", len(outcome.failed) + len(outcome.refused))
            raise ChannelException(
                f"channel {channel.name}, topic {channel.topic}: {outcome.describe(len(self._puts))}"
            )
        self._produced = True

    def _do_commit(self) -> None:
        channel = self.channel
        if self._next:
            consumer = channel._consumer()
            owned = {(p.topic, p.partition) for p in consumer.assignment()}
            offsets = [TopicPartition(t, p, o) for (t, p), o in self._next.items() if (t, p) in owned]
            if offsets:
                try:
                    consumer.commit(offsets=offsets, asynchronous=False)
                except KafkaException as exc:
                    raise ChannelException(f"channel {channel.name}: offsets not committed: {exc}") from exc
        if self._puts:
            channel.counters.add("EventPutSuccessCount", len(self._puts))
        if self._taken:
            channel.counters.add("EventTakeSuccessCount", self._taken)
        self._reset()

    def _do_rollback(self) -> None:
        channel = self.channel
        if self._produced:
            log.warning(
                "kafka channel %s: %d events rolled back after they reached the topic: they stay",
                channel.name,
                len(self._puts),
            )
        if self._first:
            consumer = channel._consumer()
            for (topic, partition), offset in self._first.items():
                # a partition no longer ours: its next owner starts at the committed offset
                with contextlib.suppress(KafkaException):
                    consumer.seek(TopicPartition(topic, partition, offset))
        self._reset()

    def _reset(self) -> None:
        self._puts, self._produced, self._taken = [], False, 0
        self._first, self._next = {}, {}


class KafkaChannel(BasicChannel):
    """See the module doc for keys and semantics."""

    counter_names = (
        *BasicChannel.counter_names,
        "ForeignRecordCount",
        "DeadLetterCount",
        "KafkaProduceFailCount",
    )

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.transaction_capacity = 1000
        self._lock = threading.Lock()
        self._kafka_producer: Producer | None = None
        self._consumers: dict[int, Consumer] = {}  # by thread: a consumer is not thread-safe
        self._lags: dict[int, int] = {}

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.topic = context.get_str("kafka.topic", "flume-channel")
        self.flume_format = context.get_bool("parseAsFlumeEvent", True)
        self.poll_timeout = context.get_int("kafka.pollTimeout", 500, minimum=0) / 1000
        self.transaction_capacity = context.get_int("transactionCapacity", 1000, minimum=1)
        keep_alive = context.get_float("keep-alive", 3.0, minimum=0.0)
        self.dead_letter_dir = Path(context.get_str("deadLetter.dir", "artimon-data/dead-letter"))
        self.producer_settings = producer_config(context, f"artimon-channel-{self.name}")
        self.consumer_settings = consumer_config(context, f"artimon-channel-{self.name}")
        self.send_timeout = keep_alive + int(self.producer_settings["message.timeout.ms"]) / 1000

    def can_reconfigure(self, context: Context) -> bool:
        return context == self.context  # new clients for anything else: replace the channel

    def _new_transaction(self) -> Transaction:
        return _KafkaTransaction(self)

    def _producer(self) -> Producer:
        with self._lock:
            if self._kafka_producer is None:
                self._kafka_producer = new_producer(self.producer_settings, f"channel {self.name}")
            return self._kafka_producer

    def _consumer(self) -> Consumer:
        thread = threading.get_ident()
        with self._lock:
            consumer = self._consumers.get(thread)
            if consumer is None:
                self._close_orphans()
                consumer = new_consumer(self.consumer_settings, f"channel {self.name}")
                consumer.subscribe([self.topic])
                self._consumers[thread] = consumer
            return consumer

    def _close_orphans(self) -> None:
        """Close the consumers of threads that ended (a sink runner replaced by a reload):
        left open, one would keep its partitions, unread, until the group expels it."""
        alive = {thread.ident for thread in threading.enumerate()}
        for thread in [t for t in self._consumers if t not in alive]:
            self._consumers.pop(thread).close()
            self._lags.pop(thread, None)

    def _note_lag(self, consumer: Consumer) -> None:
        lag = 0
        with contextlib.suppress(KafkaException):
            for position in consumer.position(consumer.assignment()):
                _low, high = consumer.get_watermark_offsets(position, cached=True)
                if position.offset >= 0 and high >= 0:
                    lag += max(0, high - position.offset)
        self._lags[threading.get_ident()] = lag

    def start(self) -> None:
        self._producer()  # a bad setting fails the start, not the first put
        super().start()

    def stop(self) -> None:
        with self._lock:
            consumers, self._consumers = list(self._consumers.values()), {}
            producer, self._kafka_producer = self._kafka_producer, None
        for consumer in consumers:
            consumer.close()  # leaves the group: partitions move at once, from the committed offsets
        if producer is not None:
            producer.flush(5)
        self._lags.clear()
        super().stop()

    @property
    def size(self) -> int:
        return sum(self._lags.values())

    @property
    def capacity(self) -> int:
        return 0
