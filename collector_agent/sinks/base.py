"""Sinks take events from one channel and deliver them.

:class:`BatchSink` does the hard part, as Flume's ``AbstractRpcSink`` does: take up to
``batchSize`` events in one transaction, ``deliver`` them, commit; roll back on failure so
the events stay in the channel. It adds a dead-letter path Flume lacks: an event that the
destination refuses as malformed (``MalformedEventError``) ``deadLetter.maxAttempts`` times
is written to ``deadLetter.dir`` and committed out of the channel instead of blocking the
flow forever.

Keys of every batch sink: ``batchSize`` (default 100), ``deadLetter.dir`` (default
``artimon-data/dead-letter``), ``deadLetter.maxAttempts`` (default 3), and
``maxEventsPerSecond`` (default 0: no limit), which paces deliveries so that a backlog
drained after an outage does not flood the destination: the events wait in the channel.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import ClassVar

from collector_agent.channels.base import BasicChannel
from collector_agent.context import Context
from collector_agent.dead_letters import write_dead_letters
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException, EventDeliveryException, MalformedEventError
from collector_agent.ledger import RoundLedger
from collector_agent.lifecycle import Component
from collector_agent.status import Status

__all__ = ["BatchSink", "Sink"]

log = logging.getLogger(__name__)

_MAX_TRACKED_STRIKES = 10_000


class Sink(Component):
    """Base of every sink; the agent sets ``channel`` (and its round ``ledger``) before ``start``."""

    kind: ClassVar[str] = "SINK"
    counter_names: ClassVar[tuple[str, ...]] = (
        "ConnectionCreatedCount",
        "ConnectionClosedCount",
        "ConnectionFailedCount",
        "BatchEmptyCount",
        "BatchUnderflowCount",
        "BatchCompleteCount",
        "EventDrainAttemptCount",
        "EventDrainSuccessCount",
        "EventWriteFail",
        "ChannelReadFail",
        "DeadLetterCount",
    )
    channel: BasicChannel
    ledger: RoundLedger | None = None

    def process(self) -> Status:
        """Move one batch; ``BACKOFF`` when there was nothing to do or the channel failed;
        raises ``EventDeliveryException`` when the destination failed (processors fail over)."""
        raise NotImplementedError


def _fingerprint(event: Event) -> bytes:
    digest = hashlib.blake2b(event.body, digest_size=16)
    digest.update(json.dumps(event.headers, sort_keys=True).encode())
    return digest.digest()


class BatchSink(Sink):
    """Take, ``deliver``, commit; see the module doc."""

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.batch_size = context.get_int("batchSize", 100, minimum=1)
        self.dead_letter_dir = Path(context.get_str("deadLetter.dir", "artimon-data/dead-letter"))
        self.max_attempts = context.get_int("deadLetter.maxAttempts", 3, minimum=1)
        self.max_rate = context.get_float("maxEventsPerSecond", 0.0, minimum=0.0)
        self._strikes: OrderedDict[bytes, int] = OrderedDict()
        self._next_take = 0.0  # time.monotonic() before which the pace allows no take
        self._stopping = threading.Event()

    def start(self) -> None:
        self._stopping.clear()
        super().start()

    def stop(self) -> None:
        self._stopping.set()
        super().stop()

    def deliver(self, events: list[Event]) -> None:
        """Deliver ``events``; raise ``MalformedEventError`` for refused events,
        anything else for a failed delivery (the batch is retried)."""
        raise NotImplementedError

    def process(self) -> Status:
        if self.max_rate:
            wait = self._next_take - time.monotonic()
            if wait > 0:  # in short slices, so that stopping the runner never waits on the pace
                self._stopping.wait(min(wait, 0.1))
                return Status.READY
        tx = self.channel.transaction()
        tx.begin()
        try:
            try:
                events = tx.take_batch(self.batch_size)
            except ChannelException:
                self.counters.add("ChannelReadFail")
                tx.rollback()
                return Status.BACKOFF
            if not events:
                tx.commit()
                self.counters.add("BatchEmptyCount")
                return Status.BACKOFF
            self.counters.add("EventDrainAttemptCount", len(events))
            deliverable, poison = self._split_poison(events)
            try:
                if deliverable:
                    self.deliver(deliverable)
                if poison:  # after the others are delivered: a failed delivery writes none
                    self._write_dead_letters(poison)
            except MalformedEventError as exc:
                tx.rollback()
                self.counters.add("EventWriteFail")
                self._strike([deliverable[i] for i in exc.indexes if 0 <= i < len(deliverable)])
                log.warning("sink %s: destination refused %d events: %s", self.name, len(exc.indexes), exc)
                return Status.BACKOFF
            except Exception as exc:
                tx.rollback()
                self.counters.add("EventWriteFail")
                raise EventDeliveryException(f"sink {self.name}: {exc}") from exc
            try:
                tx.commit()
            except ChannelException:
                self.counters.add("ChannelReadFail")
                tx.rollback()
                return Status.BACKOFF
            if self.max_rate:
                self._next_take = max(self._next_take, time.monotonic()) + len(events) / self.max_rate
            for event in poison:
                self._strikes.pop(_fingerprint(event), None)
            self.counters.add("EventDrainSuccessCount", len(deliverable))
            self.counters.add(
                "BatchCompleteCount" if len(events) == self.batch_size else "BatchUnderflowCount"
            )
            return Status.READY
        finally:
            tx.close()

    def _strike(self, events: list[Event]) -> None:
        for event in events:
            key = _fingerprint(event)
            self._strikes[key] = self._strikes.get(key, 0) + 1
            self._strikes.move_to_end(key)
        while len(self._strikes) > _MAX_TRACKED_STRIKES:
            self._strikes.popitem(last=False)

    def _split_poison(self, events: list[Event]) -> tuple[list[Event], list[Event]]:
        """``(to deliver, refused max_attempts times)``: the latter go to the dead-letter
        file, fsynced before the take commits."""
        if not self._strikes:
            return events, []
        keep: list[Event] = []
        poison: list[Event] = []
        for event in events:
            key = _fingerprint(event)
            (poison if self._strikes.get(key, 0) >= self.max_attempts else keep).append(event)
        return keep, poison

    def _write_dead_letters(self, events: list[Event]) -> None:
        path = write_dead_letters(self.dead_letter_dir, self.name, events)
        self.counters.add("DeadLetterCount", len(events))
        log.error(
            "sink %s: %d events refused %d times went to %s",
            self.name,
            len(events),
            self.max_attempts,
            path,
        )
