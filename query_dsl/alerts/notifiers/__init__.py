"""Notifier types by alias, as the agent resolves its components: a ``type`` is an alias of
``NOTIFIERS`` (``email``, ``webhook``, ``command``, ``alertmanager``), else a ``module:Class`` path whose
class has ``from_options(name, fields)`` (see :mod:`query_dsl.alerts.notifiers.base`)."""

from __future__ import annotations

import importlib

from query_dsl.alerts.notifiers.alertmanager import AlertmanagerNotifier
from query_dsl.alerts.notifiers.base import Notifier, NotifierType
from query_dsl.alerts.notifiers.command import CommandNotifier
from query_dsl.alerts.notifiers.email import EmailNotifier
from query_dsl.alerts.notifiers.webhook import WebhookNotifier

__all__ = [
    "NOTIFIERS",
    "AlertmanagerNotifier",
    "CommandNotifier",
    "EmailNotifier",
    "Notifier",
    "NotifierType",
    "WebhookNotifier",
    "register_notifier",
    "resolve",
]

NOTIFIERS: dict[str, str] = {
    "email": "query_dsl.alerts.notifiers.email:EmailNotifier",
    "webhook": "query_dsl.alerts.notifiers.webhook:WebhookNotifier",
    "command": "query_dsl.alerts.notifiers.command:CommandNotifier",
    "alertmanager": "query_dsl.alerts.notifiers.alertmanager:AlertmanagerNotifier",
}


def register_notifier(alias: str, target: str) -> None:
    """Add an alias: ``register_notifier("pager", "mycompany.alerting:PagerNotifier")``."""
    NOTIFIERS[alias] = target


def resolve(type_name: str) -> NotifierType:
    """The class for ``type_name``; ``ValueError`` naming the alias and class it tried."""
    target = NOTIFIERS.get(type_name.strip(), type_name.strip())
    module_name, _, class_name = target.partition(":")
    if not module_name or not class_name:
        raise ValueError(
            f"unknown notifier type {type_name!r} (known: {', '.join(sorted(NOTIFIERS))}, or module:Class)"
        )
    try:
        found: NotifierType = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"notifier type {type_name!r} -> {target} cannot be loaded: {exc}") from None
    if not callable(getattr(found, "from_options", None)):
        raise ValueError(f"notifier type {type_name!r} -> {target} has no from_options(name, fields)")
    return found
