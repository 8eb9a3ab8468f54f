"""``replicating`` (the default): every event to every channel of the source; channels
listed in ``optional`` may fail without failing the put."""

from __future__ import annotations

from collections.abc import Mapping

from collector_agent.channels.base import BasicChannel
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.selectors.base import ChannelSelector

__all__ = ["ReplicatingChannelSelector"]


class ReplicatingChannelSelector(ChannelSelector):
    def configure(self, context: Context, channels: Mapping[str, BasicChannel]) -> None:
        super().configure(context, channels)
        self._optional = self._named(context, "optional")
        self._required = [c for c in self.channels.values() if c not in self._optional]

    def required(self, event: Event) -> list[BasicChannel]:
        return self._required

    def optional(self, event: Event) -> list[BasicChannel]:
        return self._optional
