"""``default``: one sink, called as is."""

from __future__ import annotations

from collections.abc import Sequence

from collector_agent.context import Context
from collector_agent.sink_processors.base import SinkProcessor
from collector_agent.sinks.base import Sink
from collector_agent.status import Status

__all__ = ["DefaultSinkProcessor"]


class DefaultSinkProcessor(SinkProcessor):
    def configure(self, context: Context, sinks: Sequence[Sink]) -> None:
        if len(sinks) != 1:
            raise context.error("type", f"the default processor takes one sink, got {len(sinks)}")
        super().configure(context, sinks)

    def process(self) -> Status:
        return self.sinks[0].process()
