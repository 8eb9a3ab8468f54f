"""``seq``: generates 0, 1, 2, ... as event bodies, for tests (Flume's sequence generator).

Keys: ``batchSize`` (default 1), ``totalEvents`` (default: no end)."""

from __future__ import annotations

from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException
from collector_agent.sources.base import PollableSource
from collector_agent.status import Status

__all__ = ["SequenceSource"]


class SequenceSource(PollableSource):
    def configure(self, context: Context) -> None:
        super().configure(context)
        self.batch_size = context.get_int("batchSize", 1, minimum=1)
        self.total = context.get_int("totalEvents", 2**63 - 1, minimum=0)
        self.next_value = 0
        self._received_up_to = 0  # a batch retried after a full channel is received once

    def process(self) -> Status:
        if self.next_value >= self.total:
            return Status.BACKOFF
        end = min(self.total, self.next_value + self.batch_size)
        events = [Event({}, str(n).encode()) for n in range(self.next_value, end)]
        if end > self._received_up_to:
            self.counters.add("EventReceivedCount", end - max(self.next_value, self._received_up_to))
            self._received_up_to = end
        try:
            self.channel_processor.process_batch(events)
        except ChannelException:
            self.counters.add("ChannelWriteFail")
            return Status.BACKOFF
        self.counters.add("EventAcceptedCount", len(events))
        self.next_value = end
        return Status.READY
