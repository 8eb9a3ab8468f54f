"""Interceptors see each batch a source receives, before the selector: they may change,
add or drop events (Flume's ``Interceptor``)."""

from __future__ import annotations

from collector_agent.context import Context
from collector_agent.event import Event

__all__ = ["Interceptor"]


class Interceptor:
    """Base: ``configure`` reads keys, ``intercept`` returns the events to keep."""

    def configure(self, context: Context) -> None:
        self.context = context

    def intercept(self, events: list[Event]) -> list[Event]:
        raise NotImplementedError
