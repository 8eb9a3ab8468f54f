"""``host``: sets a header to this host's IP address or name.

Keys: ``hostHeader`` (default ``host``), ``useIP`` (default true), ``preserveExisting``
(default false)."""

from __future__ import annotations

import socket

from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.interceptors.base import Interceptor

__all__ = ["HostInterceptor"]


class HostInterceptor(Interceptor):
    def configure(self, context: Context) -> None:
        super().configure(context)
        self.header = context.get_str("hostHeader", "host")
        self.preserve = context.get_bool("preserveExisting", False)
        hostname = socket.gethostname()
        if context.get_bool("useIP", True):
            try:
                self.value = socket.gethostbyname(hostname)
            except OSError:
                self.value = "127.0.0.1"
        else:
            self.value = hostname

    def intercept(self, events: list[Event]) -> list[Event]:
        for event in events:
            if not (self.preserve and self.header in event.headers):
                event.headers[self.header] = self.value
        return events
