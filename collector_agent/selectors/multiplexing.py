"""``multiplexing``: routes by the value of one header.

Keys: ``header`` (default ``flume.selector.header``), ``mapping.<value> = channels``,
``optional.<value> = channels``, ``default = channels`` (for a missing, empty or unmapped
header)."""

from __future__ import annotations

from collections.abc import Mapping

from collector_agent.channels.base import BasicChannel
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.selectors.base import ChannelSelector

__all__ = ["MultiplexingChannelSelector"]


class MultiplexingChannelSelector(ChannelSelector):
    def configure(self, context: Context, channels: Mapping[str, BasicChannel]) -> None:
        super().configure(context, channels)
        self.header = context.get_str("header", "flume.selector.header")
        mapping = context.subset("mapping")
        self._mapping = {value: self._named(mapping, value) for value in mapping.values}
        optional = context.subset("optional")
        self._optional = {value: self._named(optional, value) for value in optional.values}
        self._default = self._named(context, "default")

    def required(self, event: Event) -> list[BasicChannel]:
        value = event.headers.get(self.header)
        return self._mapping.get(value, self._default) if value else self._default

    def optional(self, event: Event) -> list[BasicChannel]:
        value = event.headers.get(self.header)
        required = self.required(event)
        return [c for c in self._optional.get(value or "", []) if c not in required]
