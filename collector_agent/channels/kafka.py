"""``kafka`` (``org.apache.flume.channel.kafka.KafkaChannel``): the topic is the channel.

As Flume's KafkaChannel: a put produces, a take consumes, a commit commits. The puts of a
transaction are produced at ``prepare`` (what a commit does first), which returns only once
the broker acknowledged every record (``acks=all``, idempotent producer), so a committed put
is in every in-sync replica; a failure raises ``ChannelException`` and the source keeps the
events. Each thread that takes (a sink's runner) has its own consumer in the group
``kafka.consumer.group.id``; a take reads up to the transaction's room within
``kafka.pollTimeout``, and the take's commit commits the offsets after what it took: an
event leaves the channel only when its sink delivered it. A rollback of takes seeks back to
the first offset taken, so the same events are taken again (a take's offsets:
:mod:`collector_agent.kafka_offsets`). A put that was produced cannot
be taken back from the topic: rolled back after ``prepare`` (another channel of the same
put failed), its records stay, and the next hop sees them twice at worst (the stores are
idempotent). Offsets of partitions that a rebalance moved away meanwhile are not committed:
their next owner takes those events again.

Offsets are committed asynchronously, up to ``kafka.commitsInFlight`` (8) commits whose
answer has not come back; the next one then waits (a synchronous commit, answered after
every earlier one). Before a rebalance gives partitions up, and when the channel stops, what
the committed takes reached on them is committed synchronously, so their next owner starts
after it. Delivery stays at least once: an offset is committed only after its take's commit,
so nothing is lost, and a crash redelivers the takes whose commits were unanswered (the last
``kafka.commitsInFlight`` of each taking thread at most), where Flume's synchronous commit
redelivers only the take being committed (and, as here, one whose commit failed). A failed
commit is counted (``KafkaCommitFailCount``) and its partitions go with the next commit:
offsets only grow, so a later commit covers an earlier one, and an older offset is never
sent again. ``kafka.commitsInFlight = 0`` commits each take synchronously, as Flume does.

The channel works with a source (agents put into it) and without one (another producer,
our Kafka sink or a Flume agent, writes the topic; set ``parseAsFlumeEvent`` to match what
it writes), and with no sink (an agent that only feeds the topic).

A record that is not an event (:mod:`collector_agent.kafka_records`) is counted
(``ForeignRecordCount``), written to ``deadLetter.dir`` (fsynced) during the take, and
committed past with it: the partition keeps flowing.

Keys: ``kafka.bootstrap.servers`` (required), ``kafka.topic`` (``flume-channel``),
``kafka.consumer.group.id`` (``flume``), ``parseAsFlumeEvent`` (true: records are
``AvroFlumeEvent``; false: the value is the body, headers ride as record headers),
``kafka.pollTimeout`` (ms, 500), ``kafka.commitsInFlight`` (8), ``transactionCapacity``
(1000), ``keep-alive`` (s a put
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
from collector_agent.kafka_offsets import BatchOffsets, Partition, partition_names
from collector_agent.kafka_records import event_from_record

__all__ = ["KafkaChannel"]

log = logging.getLogger(__name__)

COMMITS_IN_FLIGHT = 8


class _Taker:
    """A taking thread's consumer, the offsets of its open take and those its committed takes
    reached.

    A commit is sent asynchronously while fewer than ``commits_in_flight`` earlier ones are
    unacknowledged, else synchronously; the broker answers a member's commits in order, so a
    synchronous one returns after every earlier one completed. Each commit carries, for the
    partitions it touches and those whose last commit failed, the highest offset that the
    committed takes reached: offsets only grow, so a later commit covers a failed earlier one
    and a failure is never retried with an older offset. Before a rebalance gives partitions
    up, and at close, what was reached on them is committed synchronously.
    """

    def __init__(self, channel: KafkaChannel) -> None:
        self.channel = channel
        self.take = BatchOffsets(f"kafka channel {channel.name}")  # the open take's offsets
        self.reached: dict[Partition, int] = {}  # after the events of committed takes
        self.unsent: set[Partition] = set()  # partitions whose last commit failed
        self.unacknowledged = 0  # asynchronous commits whose outcome has not come back
        self.lag = 0
        self.consumer = new_consumer(
            {**channel.consumer_settings, "on_commit": self._on_commit}, f"channel {channel.name}"
        )
        self.consumer.subscribe(
            [channel.topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    def commit_take(self) -> None:
        """Commit what the open take reached (its transaction is committed)."""
        owned = {(p.topic, p.partition) for p in self.consumer.assignment()}
        for where, offset in self.take.next.items():
            if where in owned:
                self.reached[where] = max(offset, self.reached.get(where, 0))
        touched = (self.take.next.keys() | self.unsent) & owned
        self.take.clear()
        if not touched:
            return
        offsets = [TopicPartition(t, p, self.reached[(t, p)]) for t, p in touched]
        if self.unacknowledged < self.channel.commits_in_flight:
            self.unacknowledged += 1
            self.consumer.commit(offsets=offsets, asynchronous=True)
            self.unsent -= touched
        else:
            self._commit_now(offsets)

    def roll_back_take(self) -> None:
        """Seek back to the open take's first offsets: the same events are taken again."""
        self.take.rewind(self.consumer)

    def close(self) -> None:
        """Commit what was reached on the partitions still owned, then leave the group."""
        with contextlib.suppress(KafkaException):
            owned = {(p.topic, p.partition) for p in self.consumer.assignment()}
            self._commit_now(
                [TopicPartition(t, p, o) for (t, p), o in self.reached.items() if (t, p) in owned]
            )
        self.consumer.close()  # leaves the group: partitions move at once, from the committed offsets

    def _commit_now(self, offsets: list[TopicPartition]) -> None:
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            self._failed(str(exc.args[0]), offsets)
        else:
            self.unsent -= {(p.topic, p.partition) for p in offsets}

    def _failed(self, reason: str, offsets: list[TopicPartition]) -> None:
        """A commit failed: counted, and its partitions go with the next commit (the events
        were delivered; only their redelivery after a crash is at stake)."""
        self.channel.counters.add("KafkaCommitFailCount")
        log.warning("kafka channel %s: offsets not committed yet: %s", self.channel.name, reason)
        self.unsent |= {(p.topic, p.partition) for p in offsets if (p.topic, p.partition) in self.reached}

    # -- called from inside consume(), commit() and close(), on the taking thread ---------------

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        self.unacknowledged = max(0, self.unacknowledged - 1)
        failed = partitions if error is not None else [p for p in partitions if p.error is not None]
        if failed:
            self._failed(str(error or failed[0].error), failed)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("kafka channel %s: assigned %s", self.channel.name, partition_names(partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info("kafka channel %s: revoked %s", self.channel.name, partition_names(partitions))
        revoked = {(p.topic, p.partition) for p in partitions}
        with contextlib.suppress(KafkaException):
            self._commit_now(
                [TopicPartition(t, p, o) for (t, p), o in self.reached.items() if (t, p) in revoked]
            )
        self._forget(revoked)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.warning("kafka channel %s: lost %s", self.channel.name, partition_names(partitions))
        self._forget({(p.topic, p.partition) for p in partitions})

    def _forget(self, partitions: set[Partition]) -> None:
        """Partitions given up: neither the open take nor a later commit commits them."""
        self.take.forget(partitions)
        for where in partitions:
            self.reached.pop(where, None)
        self.unsent -= partitions


class _KafkaTransaction(Transaction):
    channel: KafkaChannel

    def __init__(self, channel: KafkaChannel) -> None:
        super().__init__(channel)
        self._puts: list[Event] = []
        self._produced = False
        self._taken = 0
        self._taker: _Taker | None = None

    def _do_put(self, events: Sequence[Event]) -> None:
        self._puts.extend(events)

    def _do_take(self, limit: int) -> list[Event]:
        channel = self.channel
        taker = self._taker = channel._taker()
        events: list[Event] = []
        foreign: list[Event] = []
        for message in taker.consumer.consume(limit, timeout=channel.poll_timeout):
            position = taker.take.track(message)
            if position is None:
                continue
            topic, partition, offset = position
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
        channel._note_lag(taker)
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
        if self._taker is not None:
            self._taker.commit_take()
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
        if self._taker is not None:
            self._taker.roll_back_take()
        self._reset()

    def _reset(self) -> None:
        self._puts, self._produced, self._taken, self._taker = [], False, 0, None


class KafkaChannel(BasicChannel):
    """See the module doc for keys and semantics."""

    counter_names = (
        *BasicChannel.counter_names,
        "ForeignRecordCount",
        "DeadLetterCount",
        "KafkaProduceFailCount",
        "KafkaCommitFailCount",
    )

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.transaction_capacity = 1000
        self._lock = threading.Lock()
        self._kafka_producer: Producer | None = None
        self._takers: dict[int, _Taker] = {}  # by thread: a consumer is not thread-safe

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.topic = context.get_str("kafka.topic", "flume-channel")
        self.flume_format = context.get_bool("parseAsFlumeEvent", True)
        self.poll_timeout = context.get_int("kafka.pollTimeout", 500, minimum=0) / 1000
        self.transaction_capacity = context.get_int("transactionCapacity", 1000, minimum=1)
        self.commits_in_flight = context.get_int("kafka.commitsInFlight", COMMITS_IN_FLIGHT, minimum=0)
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

    def _taker(self) -> _Taker:
        thread = threading.get_ident()
        with self._lock:
            taker = self._takers.get(thread)
            if taker is None:
                self._close_orphans()
                taker = self._takers[thread] = _Taker(self)
            return taker

    def _close_orphans(self) -> None:
        """Close the consumers of threads that ended (a sink runner replaced by a reload):
        left open, one would keep its partitions, unread, until the group expels it."""
        alive = {thread.ident for thread in threading.enumerate()}
        for thread in [t for t in self._takers if t not in alive]:
            self._takers.pop(thread).close()

    def _note_lag(self, taker: _Taker) -> None:
        consumer, lag = taker.consumer, 0
        with contextlib.suppress(KafkaException):
            for position in consumer.position(consumer.assignment()):
                _low, high = consumer.get_watermark_offsets(position, cached=True)
                if position.offset >= 0 and high >= 0:
                    lag += max(0, high - position.offset)
        taker.lag = lag

    def start(self) -> None:
        self._producer()  # a bad setting fails the start, not the first put
        super().start()

    def stop(self) -> None:
        with self._lock:
            takers, self._takers = list(self._takers.values()), {}
            producer, self._kafka_producer = self._kafka_producer, None
        for taker in takers:
            taker.close()
        if producer is not None:
            producer.flush(5)
        super().stop()

    @property
    def size(self) -> int:
        return sum(taker.lag for taker in list(self._takers.values()))

    @property
    def capacity(self) -> int:
        return 0
