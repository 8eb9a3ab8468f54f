"""What the alert engine keeps and what notifiers receive: an :class:`Alert` per (rule,
series), its :class:`AlertState`, the :class:`Transition` of one evaluation and the
:class:`Notification` of one rule's alerts in one state."""

from __future__ import annotations

import enum
import math
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Alert", "AlertState", "Notification", "Transition", "iso_time", "json_number"]


class AlertState(enum.Enum):
    """The states of an alert (the moves are drawn in :class:`~query_dsl.alerts.AlertEngine`)."""

    INACTIVE = "inactive"
    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"


def json_number(value: float) -> float | str:
    """A float JSON can carry: finite ones as they are, others as text (``+Inf``, ``NaN``)."""
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def iso_time(ms: int) -> str:
    """Epoch ms as ISO 8601 UTC to the second: ``2024-05-01T12:00:00Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


@dataclass
class Alert:
    """One series of one rule's result. ``series`` is the series' key (``name{k=v}``, or
    ``{k=v}`` for a computed series); ``labels`` its labels with the rule's labels over them
    and ``alertname``; ``value`` its last value. Times are epoch ms; ``keep_firing_since_ms``
    is when a firing alert's series went away while its rule's ``keep_firing_for`` holds it."""

    rule: str
    series: str
    labels: dict[str, str]
    state: AlertState
    value: float
    active_since_ms: int
    fired_ms: int | None = None
    resolved_ms: int | None = None
    last_notified_ms: int | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    keep_firing_since_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (what webhooks and commands receive, and the state file keeps)."""
        return {
            "rule": self.rule,
            "series": self.series,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "state": self.state.value,
            "value": json_number(self.value),
            "active_since_ms": self.active_since_ms,
            "active_since": iso_time(self.active_since_ms),
            "fired_ms": self.fired_ms,
            "resolved_ms": self.resolved_ms,
            "last_notified_ms": self.last_notified_ms,
            "keep_firing_since_ms": self.keep_firing_since_ms,
        }


@dataclass(frozen=True)
class Transition:
    """An alert that changed state at ``at_ms`` (a copy, as it was then)."""

    alert: Alert
    previous: AlertState
    at_ms: int

    @property
    def current(self) -> AlertState:
        return self.alert.state


@dataclass(frozen=True)
class Notification:
    """Alerts of one rule, all firing or all resolved, sent together to the rule's notifiers.

    ``status`` is ``"firing"`` (newly firing, or due again after the repeat interval) or
    ``"resolved"``.
    """

    rule: str
    status: str
    alerts: tuple[Alert, ...]
    at_ms: int

    @property
    def subject(self) -> str:
        if self.status == "resolved":
            return f"[RESOLVED] {self.rule}"
        return f"[FIRING:{len(self.alerts)}] {self.rule}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "rule": self.rule,
            "status": self.status,
            "at_ms": self.at_ms,
            "at": iso_time(self.at_ms),
            "alerts": [alert.to_dict() for alert in self.alerts],
        }

    def text(self) -> str:
        """A plain-text account: the subject, then each alert with its annotations."""
        lines = [self.subject, ""]
        for alert in self.alerts:
            at = (
                alert.resolved_ms
                if self.status == "resolved" and alert.resolved_ms
                else alert.active_since_ms
            )
            verb = "resolved at" if self.status == "resolved" else "active since"
            lines.append(f"{alert.series or alert.rule}  value {alert.value:g}  {verb} {iso_time(at)}")
            for name, text in sorted(alert.annotations.items()):
                lines.append(f"  {name}: {text}")
            labels = ", ".join(f"{k}={v}" for k, v in sorted(alert.labels.items()))
            lines.append(f"  labels: {labels}")
            lines.append("")
        return "\n".join(lines)
