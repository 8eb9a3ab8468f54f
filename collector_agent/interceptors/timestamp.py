"""``timestamp``: sets a header to the time of interception, epoch ms.

Keys: ``headerName`` (default ``timestamp``), ``preserveExisting`` (default false)."""

from __future__ import annotations

import time

from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.interceptors.base import Interceptor

__all__ = ["TimestampInterceptor"]


class TimestampInterceptor(Interceptor):
    def configure(self, context: Context) -> None:
        super().configure(context)
        self.header = context.get_str("headerName", "timestamp")
        self.preserve = context.get_bool("preserveExisting", False)

    def intercept(self, events: list[Event]) -> list[Event]:
        now = str(int(time.time() * 1000))
        for event in events:
            if not (self.preserve and self.header in event.headers):
                event.headers[self.header] = now
        return events
