"""``type: alertmanager``: alerts POSTed to a Prometheus Alertmanager's v2 API
(``POST <url>/api/v2/alerts``), as a Prometheus server sends them.

Settings: ``url`` (the Alertmanager's base URL, http or https, e.g. ``http://am:9093``),
``timeout`` (a duration, 10s), ``headers`` (a mapping; ``${ENV_NAME}`` for a token),
``generator_url`` (a link back to the source of the alerts, default none). Each alert is
``{labels, annotations, startsAt, endsAt?, generatorURL?}``: ``labels`` are the alert's
(the series' labels, the rule's, ``alertname``), ``startsAt`` the time it became active,
and ``endsAt`` the time it resolved, on a resolved notification only (the Alertmanager
resolves a firing alert that is not sent again within its ``resolve_timeout``, 5m by
default: give the rules that notify it a ``repeat_interval`` below that, as Prometheus
resends every minute). Answers are handled as by the ``webhook`` notifier: 2xx delivered;
408, 425, 429, 5xx and transport errors retried.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from query_dsl.alerts.fields import Fields
from query_dsl.alerts.model import Notification, iso_time
from query_dsl.alerts.notifiers.webhook import WebhookNotifier

__all__ = ["AlertmanagerNotifier"]


@dataclass
class AlertmanagerNotifier(WebhookNotifier):
    generator_url: str = ""

    @classmethod
    def from_options(cls, name: str, fields: Fields) -> AlertmanagerNotifier:
        base = WebhookNotifier.from_options(name, fields)
        return cls(
            name,
            base.url.rstrip("/") + "/api/v2/alerts",
            timeout=base.timeout,
            headers=base.headers,
            generator_url=fields.text("generator_url", ""),
        )

    @staticmethod
    def alerts(notification: Notification, generator_url: str = "") -> list[dict[str, Any]]:
        """The body of ``POST /api/v2/alerts`` for ``notification`` (the API's
        ``postableAlerts``)."""
        out = []
        for alert in notification.alerts:
            posted: dict[str, Any] = {
                "labels": dict(alert.labels),
                "annotations": dict(alert.annotations),
                "startsAt": iso_time(alert.active_since_ms),
            }
            if notification.status == "resolved":
                posted["endsAt"] = iso_time(alert.resolved_ms or notification.at_ms)
            if generator_url:
                posted["generatorURL"] = generator_url
            out.append(posted)
        return out

    def send(self, notification: Notification) -> None:
        self.post(self.alerts(notification, self.generator_url))
