"""The notifier contract.

A notifier delivers one :class:`~query_dsl.alerts.Notification` per ``send`` call, once:
it raises :class:`~query_dsl.NotifyError` when it could not (``retryable=False`` when trying
again cannot help), and the dispatcher retries it with backoff, from a thread of its own,
so a notifier may block up to its own timeout. A type is built from its rules-file settings
by ``from_options(name, fields)``, which reads them with :class:`~query_dsl.alerts.Fields`
(unknown keys are rejected afterwards) and opens nothing: connections wait for ``send``.
"""

from __future__ import annotations

from typing import Protocol

from query_dsl.alerts.fields import Fields
from query_dsl.alerts.model import Notification

__all__ = ["Notifier", "NotifierType"]


class Notifier(Protocol):
    def send(self, notification: Notification) -> None: ...

    def close(self) -> None: ...


class NotifierType(Protocol):
    def from_options(self, name: str, fields: Fields) -> Notifier: ...
