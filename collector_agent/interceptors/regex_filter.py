"""``regex_filter``: keeps (or with ``excludeEvents``, drops) events whose body, read as
UTF-8, matches ``regex``.

Keys: ``regex`` (default ``.*``), ``excludeEvents`` (default false)."""

from __future__ import annotations

import re

from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.interceptors.base import Interceptor

__all__ = ["RegexFilterInterceptor"]


class RegexFilterInterceptor(Interceptor):
    def configure(self, context: Context) -> None:
        super().configure(context)
        pattern = context.get_str("regex", ".*")
        try:
            self.regex = re.compile(pattern)
        except re.error as exc:
            raise context.error("regex", f"{pattern!r} is not a valid regex: {exc}") from None
        self.exclude = context.get_bool("excludeEvents", False)

    def intercept(self, events: list[Event]) -> list[Event]:
        search = self.regex.search
        return [
            e
            for e in events
            if (search(e.body.decode("utf-8", errors="replace")) is not None) != self.exclude
        ]
