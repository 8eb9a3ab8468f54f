"""What a source hands its events to: interceptors, then the selector, then the channels.

A batch's required channels commit all or none: every required channel's transaction is
put and *prepared* (room reserved, durable writes done) before any commits, and a failure
anywhere rolls all of them back, so a retry of the batch duplicates nothing (Flume commits
channel after channel and duplicates on retry). Across a crash too: when two or more of them
are durable, their prepares share a :class:`~collector_agent.channels.base.PutGroup` and each
writes the outcome down (``decide``) once all are prepared, before any commits; a process
killed between two prepares leaves a put that every channel undoes at its next start,
instead of one held by some channels only (the ``artimon`` source's round in VHMS and not in
the Parquet history). Optional channels are written afterwards, each on its own; their
failures are counted and logged, never raised.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from collector_agent.channels.base import BasicChannel, PutGroup, Transaction, TransactionState
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException, TransactionStateError
from collector_agent.integrity import SetAside
from collector_agent.interceptors.base import Interceptor
from collector_agent.selectors.base import ChannelSelector

__all__ = ["ChannelProcessor"]

log = logging.getLogger(__name__)


class ChannelProcessor:
    def __init__(
        self,
        selector: ChannelSelector,
        interceptors: Sequence[Interceptor] = (),
        integrity: SetAside | None = None,
    ) -> None:
        self.selector = selector
        self.interceptors = list(interceptors)
        self.integrity = integrity  # the source's: stamps what comes unstamped, checks the rest
        self.optional_failures = 0

    def process(self, event: Event) -> None:
        self.process_batch([event])

    def process_batch(self, events: Sequence[Event]) -> None:
        """Put ``events`` into their channels; ``ChannelException`` (or its subclass
        ``ChannelFullException``) if a required channel refused them: then none holds them.
        With ``integrity``, events whose stamp is wrong are set aside first (``integrity.py``)."""
        batch = list(events)
        if self.integrity is not None:
            batch = self.integrity.admit(batch)
        for interceptor in self.interceptors:
            batch = interceptor.intercept(batch)
        if not batch:
            return
        required: dict[BasicChannel, list[Event]] = {}
        optional: dict[BasicChannel, list[Event]] = {}
        selector = self.selector
        for event in batch:
            for channel in selector.required(event):
                required.setdefault(channel, []).append(event)
            for channel in selector.optional(event):
                optional.setdefault(channel, []).append(event)
        self._put_atomically(required)
        for channel, channel_events in optional.items():
            try:
                with channel.transaction() as tx:
                    tx.put_batch(channel_events)
            except ChannelException as exc:
                self.optional_failures += 1
                log.debug(
                    "optional channel %s refused %d events: %s",
                    channel.name,
                    len(channel_events),
                    exc,
                )

    @staticmethod
    def _put_atomically(required: dict[BasicChannel, list[Event]]) -> None:
        opened: list[Transaction] = []
        try:
            for channel, channel_events in required.items():
                tx = channel.transaction()
                tx.begin()
                opened.append(tx)
                tx.put_batch(channel_events)
            durable = tuple(tx.channel.durable_id for tx in opened if tx.channel.durable_id)
            group = PutGroup(uuid.uuid4().hex, durable) if len(durable) > 1 else None
            for tx in opened:
                tx.prepare(group)
            if group is not None:
                for tx in opened:
                    tx.decide()
        except BaseException:
            for tx in opened:
                if tx.state in (TransactionState.OPEN, TransactionState.PREPARED):
                    try:
                        tx.rollback()
                    except (ChannelException, TransactionStateError):
                        log.exception("rollback on channel %s failed", tx.channel.name)
                tx.close()
            raise
        for tx in opened:
            tx.commit()
            tx.close()
