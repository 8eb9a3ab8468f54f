"""Channel selectors pick, per event, the required and the optional channels."""

from __future__ import annotations

from collections.abc import Mapping

from collector_agent.channels.base import BasicChannel
from collector_agent.context import Context
from collector_agent.event import Event

__all__ = ["ChannelSelector"]


class ChannelSelector:
    """Base: ``configure`` gets the selector's keys and the source's channels by name."""

    def configure(self, context: Context, channels: Mapping[str, BasicChannel]) -> None:
        self.context = context
        self.channels = dict(channels)

    def _named(self, context: Context, key: str, default: list[str] | None = None) -> list[BasicChannel]:
        chosen = []
        for name in context.get_list(key, default if default is not None else []):
            if name not in self.channels:
                raise context.error(
                    key,
                    f"channel {name!r} is not one of the source's channels ({' '.join(self.channels)})",
                )
            chosen.append(self.channels[name])
        return chosen

    def required(self, event: Event) -> list[BasicChannel]:
        raise NotImplementedError

    def optional(self, event: Event) -> list[BasicChannel]:
        raise NotImplementedError
