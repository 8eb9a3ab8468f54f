"""Sink processors decide which sink of a group processes next (Flume's ``SinkProcessor``)."""

from __future__ import annotations

from collections.abc import Sequence

from collector_agent.context import Context
from collector_agent.sinks.base import Sink
from collector_agent.status import Status

__all__ = ["SinkProcessor"]


class SinkProcessor:
    """Base: ``configure`` gets the group's keys (``processor.*`` stripped) and sinks."""

    min_sinks = 1

    def configure(self, context: Context, sinks: Sequence[Sink]) -> None:
        if len(sinks) < self.min_sinks:
            raise context.error("type", f"{type(self).__name__} needs at least {self.min_sinks} sinks")
        self.context = context
        self.sinks = list(sinks)

    def start(self) -> None:
        for sink in self.sinks:
            sink.start()

    def stop(self) -> None:
        for sink in self.sinks:
            sink.stop()

    def process(self) -> Status:
        raise NotImplementedError
