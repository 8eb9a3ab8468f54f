"""``null``: takes events and discards them (counting them). Keys: ``batchSize``."""

from __future__ import annotations

from collector_agent.event import Event
from collector_agent.sinks.base import BatchSink

__all__ = ["NullSink"]


class NullSink(BatchSink):
    def deliver(self, events: list[Event]) -> None:
        """Nothing to do: the commit is the delivery."""
