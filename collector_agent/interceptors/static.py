"""``static``: sets a fixed header.

Keys: ``key`` (default ``key``), ``value`` (default ``value``), ``preserveExisting``
(default **true**, as in Flume)."""

from __future__ import annotations

from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.interceptors.base import Interceptor

__all__ = ["StaticInterceptor"]


class StaticInterceptor(Interceptor):
    def configure(self, context: Context) -> None:
        super().configure(context)
        self.key = context.get_str("key", "key")
        self.value = context.get_str("value", "value")
        self.preserve = context.get_bool("preserveExisting", True)

    def intercept(self, events: list[Event]) -> list[Event]:
        for event in events:
            if not (self.preserve and self.key in event.headers):
                event.headers[self.key] = self.value
        return events
