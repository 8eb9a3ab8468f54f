"""Sources: event-driven ones (a server) and pollable ones (a runner calls ``process``)."""

from __future__ import annotations

from typing import ClassVar

from collector_agent.channel_processor import ChannelProcessor
from collector_agent.context import Context
from collector_agent.ledger import RoundLedger
from collector_agent.lifecycle import Component
from collector_agent.status import Status

__all__ = ["EventDrivenSource", "PollableSource", "Source"]


class Source(Component):
    """Base of every source; the agent sets ``channel_processor`` (and its round ``ledger``)
    before ``start``."""

    kind: ClassVar[str] = "SOURCE"
    counter_names: ClassVar[tuple[str, ...]] = (
        "EventReceivedCount",
        "EventAcceptedCount",
        "AppendReceivedCount",
        "AppendAcceptedCount",
        "AppendBatchReceivedCount",
        "AppendBatchAcceptedCount",
        "OpenConnectionCount",
        "EventReadFail",
        "ChannelWriteFail",
        "GenericProcessingFail",
        "ChecksumMismatchCount",
    )
    channel_processor: ChannelProcessor
    ledger: RoundLedger | None = None


class EventDrivenSource(Source):
    """A source that runs its own threads (a server) between ``start`` and ``stop``."""


class PollableSource(Source):
    """A source the runner calls in a loop; ``BACKOFF`` makes the runner sleep
    ``min(maxBackoffSleep, backoffSleepIncrement * 2**(n-1))`` ms after n in a row."""

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.backoff_increment = context.get_int("backoffSleepIncrement", 100, minimum=1) / 1000
        self.max_backoff = context.get_int("maxBackoffSleep", 5000, minimum=1) / 1000

    def process(self) -> Status:
        raise NotImplementedError
