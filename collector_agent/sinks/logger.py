"""``logger``: logs each event at INFO (headers and the first ``maxBytesToLog`` bytes of
the body, default 16, as Flume does). Keys: ``batchSize``, ``maxBytesToLog``."""

from __future__ import annotations

import logging

from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.sinks.base import BatchSink

__all__ = ["LoggerSink"]

log = logging.getLogger(__name__)


class LoggerSink(BatchSink):
    def configure(self, context: Context) -> None:
        super().configure(context)
        self.max_bytes = context.get_int("maxBytesToLog", 16, minimum=0)

    def deliver(self, events: list[Event]) -> None:
        for event in events:
            body = event.body[: self.max_bytes]
            log.info("Event: { headers:%s body: %s }", event.headers, body.decode("utf-8", "replace"))
