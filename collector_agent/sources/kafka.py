"""``kafka`` (``org.apache.flume.source.kafka.KafkaSource``): a consumer group reading topics.

Each ``process`` reads up to ``batchSize`` records for at most ``batchDurationMillis``, puts
the events into the channels in one batch, and only then commits the offsets after them:
at-least-once, as Flume does. When the channels refuse the batch (full), the consumer seeks
back to the batch's first offsets and the same records are read again after the backoff (the
batch's offsets: :mod:`collector_agent.kafka_offsets`).

Rebalances lose nothing: the records of a batch still being read when partitions are
revoked are put into the channels and their offsets committed inside the revocation (while
the group still lets this member commit), so the next owner starts right after them and
reads none twice. If that put fails, nothing is committed and the next owner reads them
again (stores are idempotent on series and time, so a replay is invisible). Partitions
*lost* (the member was expelled) are dropped without a commit for the same reason.

A record that is not an event (:mod:`collector_agent.kafka_records`: random bytes where an
``AvroFlumeEvent`` was expected, a header that is not UTF-8) is counted
(``ForeignRecordCount``), written to ``deadLetter.dir`` (fsynced) and committed past with the
batch: the partition keeps flowing. A record that is an event but not an Artimon sample
batch is the next sinks' to refuse (they set it aside in their own dead-letter file).

Keys: ``kafka.bootstrap.servers`` (required), ``kafka.topics`` (comma-separated) or
``kafka.topics.regex`` (one of them), ``kafka.consumer.group.id`` (default ``flume``),
``batchSize`` (1000), ``batchDurationMillis`` (1000), ``useFlumeEventFormat`` (false),
``setTopicHeader`` (true) and ``topicHeader`` (``topic``), ``deadLetter.dir`` (default
``artimon-data/dead-letter``), ``kafka.consumer.*`` (:mod:`collector_agent.kafka_client`).
Each event gets Flume's headers ``topic``, ``partition``, ``offset``, ``timestamp`` and
``key`` unless it has them. Counted besides the source counters: Flume's
``KafkaEventGetTimer``, ``KafkaCommitTimer``, ``KafkaEmptyCount``, and ``ForeignRecordCount``,
``DeadLetterCount``, ``KafkaCommitFailCount``, ``RebalanceCount``.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from collector_agent.context import Context
from collector_agent.dead_letters import write_dead_letters
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException, ForeignRecordError
from collector_agent.kafka_client import consumer_config, new_consumer
from collector_agent.kafka_offsets import BatchOffsets, partition_names
from collector_agent.kafka_records import event_from_record
from collector_agent.sources.base import PollableSource
from collector_agent.status import Status

__all__ = ["KafkaSource"]

log = logging.getLogger(__name__)


class KafkaSource(PollableSource):
    counter_names = (
        *PollableSource.counter_names,
        "KafkaEventGetTimer",
        "KafkaCommitTimer",
        "KafkaEmptyCount",
        "ForeignRecordCount",
        "DeadLetterCount",
        "KafkaCommitFailCount",
        "RebalanceCount",
    )

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._consumer: Consumer | None = None
        self._events: list[Event] = []
        self._foreign: list[Event] = []
        self._offsets = BatchOffsets(f"kafka source {name}", lambda: self.counters.add("EventReadFail"))
        self._revoked = False

    def configure(self, context: Context) -> None:
        super().configure(context)
        topics = context.get_optional("kafka.topics")
        pattern = context.get_optional("kafka.topics.regex")
        if (topics is None) == (pattern is None):
            raise context.error("kafka.topics", "name the topics, or kafka.topics.regex, (one of them)")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise context.error("kafka.topics.regex", f"{pattern!r} is not a regex: {exc}") from None
            self.topics = [f"^{pattern.removeprefix('^')}"]  # librdkafka reads '^' as "a regex"
        else:
            self.topics = [t.strip() for t in (topics or "").split(",") if t.strip()]
            if not self.topics:
                raise context.error("kafka.topics", f"{topics!r} names no topic")
        self.batch_size = context.get_int("batchSize", 1000, minimum=1)
        self.batch_duration = context.get_int("batchDurationMillis", 1000, minimum=1) / 1000
        self.flume_format = context.get_bool("useFlumeEventFormat", False)
        self.set_topic_header = context.get_bool("setTopicHeader", True)
        self.topic_header = context.get_str("topicHeader", "topic")
        self.dead_letter_dir = Path(context.get_str("deadLetter.dir", "artimon-data/dead-letter"))
        self.settings = consumer_config(context, f"artimon-source-{self.name}")

    def start(self) -> None:
        consumer = new_consumer(self.settings, f"source {self.name}")
        consumer.subscribe(
            self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        self._consumer = consumer
        super().start()

    def stop(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()  # leaves the group: its partitions move at once, from the committed offsets
        self._clear()
        super().stop()

    # -- rebalances (called from inside consume(), on this source's runner thread) ------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.counters.add("RebalanceCount")
        log.info("kafka source %s: assigned %s", self.name, partition_names(partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("kafka source %s: revoked %s", self.name, partition_names(partitions))
        self._revoked = True
        if self._events or self._foreign:
            self._deliver(consumer, rewind=False)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.warning(
            "kafka source %s: lost %s; their uncommitted records go to the next owner",
            self.name,
            partition_names(partitions),
        )
        self._revoked = True
        self._clear()

    # -- the batch ----------------------------------------------------------------------------

    def process(self) -> Status:
        consumer = self._consumer
        if consumer is None:
            return Status.BACKOFF
        started = time.monotonic()
        deadline = started + self.batch_duration
        self._revoked = False
        while len(self._events) + len(self._foreign) < self.batch_size:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            messages = consumer.consume(
                self.batch_size - len(self._events) - len(self._foreign), timeout=left
            )
            for message in messages:  # even after a revocation: the commit may fail, not the read
                self._read(message)
            if self._revoked or not messages:
                break
        if not self._events and not self._foreign:
            self.counters.add("KafkaEmptyCount")
            return Status.BACKOFF
        self.counters.add("KafkaEventGetTimer", int((time.monotonic() - started) * 1000))
        return Status.READY if self._deliver(consumer, rewind=True) else Status.BACKOFF

    def _read(self, message: Message) -> None:
        position = self._offsets.track(message)
        if position is None:
            return
        topic, partition, offset = position
        try:
            event = event_from_record(message.value(), message.headers(), self.flume_format)
        except ForeignRecordError as exc:
            self.counters.add("ForeignRecordCount")
            headers = {"topic": topic, "partition": str(partition), "offset": str(offset), "reason": str(exc)}
            self._foreign.append(Event(headers, message.value() or b""))
            return
        headers = event.headers
        if self.set_topic_header:
            headers.setdefault(self.topic_header, topic)
        headers.setdefault("partition", str(partition))
        headers.setdefault("offset", str(offset))
        headers.setdefault("timestamp", str(message.timestamp()[1]))
        key = message.key()
        if key is not None and "key" not in headers:
            headers["key"] = key.decode(errors="replace")
        self._events.append(event)

    def _deliver(self, consumer: Consumer, rewind: bool) -> bool:
        """Put the batch into the channels, set its foreign records aside, commit its offsets;
        on a refusal, seek back (``rewind``) so that the records are read again."""
        events, foreign = self._events, self._foreign
        received = len(events) + len(foreign)
        self.counters.add("EventReceivedCount", received)
        try:
            if events:
                self.channel_processor.process_batch(events)
            if foreign:
                write_dead_letters(self.dead_letter_dir, self.name, foreign, role="source")
        except (ChannelException, OSError) as exc:
            self.counters.add(
                "ChannelWriteFail"
            )  # counted, not logged each time: a full channel is backpressure
            log.debug(
                "kafka source %s: %d events not accepted, read again later: %s", self.name, received, exc
            )
            if rewind:
                self._offsets.rewind(consumer)
            self._clear()
            return False
        self.counters.add("EventAcceptedCount", len(events))
        self.counters.add("DeadLetterCount", len(foreign))
        started = time.monotonic()
        try:
            consumer.commit(offsets=self._offsets.to_commit(), asynchronous=False)
        except KafkaException as exc:  # the group moved on: the next owner reads these again
            self.counters.add("KafkaCommitFailCount")
            log.warning(
                "kafka source %s: offsets not committed (%s); records may be read twice", self.name, exc
            )
        self.counters.add("KafkaCommitTimer", int((time.monotonic() - started) * 1000))
        self._clear()
        return True

    def _clear(self) -> None:
        self._events, self._foreign = [], []
        self._offsets.clear()
