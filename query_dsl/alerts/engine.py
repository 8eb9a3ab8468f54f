"""The alert engine: every rule evaluated at one instant, an alert per series of its
result, a state machine per alert, and notifications handed to the dispatcher.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from bookkeeper.wire import format_series
from query_dsl.aggregates import aggregate
from query_dsl.alerts.dispatch import Dispatcher
from query_dsl.alerts.model import Alert, AlertState, Notification, Transition, iso_time
from query_dsl.alerts.recording import Recorder
from query_dsl.alerts.rules import AlertConfig, Rule
from query_dsl.alerts.source import QuerySource
from query_dsl.alerts.state import StateFile
from query_dsl.alerts.templates import render
from query_dsl.exceptions import AlertRuleError, QueryLimitError
from query_dsl.matrix import Matrix

__all__ = ["AlertEngine", "Evaluation", "RuleHealth"]

log = logging.getLogger(__name__)


@dataclass
class RuleHealth:
    """How a rule's evaluations go; ``last_error`` is ``None`` when the last one worked."""

    rule: str
    evaluations: int = 0
    errors: int = 0
    last_error: str | None = None
    last_evaluated_ms: int | None = None
    last_duration_s: float = 0.0
    active_alerts: int = 0

    @property
    def ok(self) -> bool:
        return self.last_error is None


@dataclass(frozen=True)
class Evaluation:
    """What one evaluation did: state changes, notifications handed over, and the rules
    whose query failed (rule name to the error)."""

    at_ms: int
    transitions: list[Transition] = field(default_factory=list)
    notifications: list[Notification] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


class AlertEngine:
    """Evaluates ``config``'s rules through ``source``; ``evaluate(now_ms)`` once, ``run(stop)``
    every interval until ``stop`` is set.

    An alert is one (rule, series); "true" below means the series is in the rule's result
    and its last non-NaN value meets the rule's condition (any value, without one)::

        INACTIVE ──true──▶ PENDING ──true for ≥ `for`──▶ FIRING ──false or gone──▶ RESOLVED ──▶ INACTIVE
            ▲                 │                           │ ▲      (after `keep_firing_for`
            └──false or gone──┘ (silently)                └─┘       since it went, if set)
                                                  still true (or kept): notified
                                                  again every repeat_interval

    - With ``for: 0`` an alert goes from INACTIVE to FIRING in one evaluation.
    - Notifications: on entering FIRING, every ``repeat_interval`` while FIRING, and on
      RESOLVED; never for PENDING. A RESOLVED alert is reported once and forgotten: if its
      series comes back it starts over as PENDING.
    - A rule whose query fails keeps its alerts as they are (an API outage resolves
      nothing); the error is logged, counted in :meth:`health` and listed in the
      :class:`Evaluation`.
    - With ``state_file``, pending and firing alerts (their times, and when they were last
      notified) are saved after every evaluation that changed them and loaded at start, so
      a restart neither re-notifies nor restarts a ``for``.

    The engine owns a :class:`Dispatcher` over the config's receivers unless given one;
    :meth:`close` stops it after up to ``timeout`` seconds of delivering what is queued.
    With a ``recorder`` (a Prometheus rule file's recording rules) every evaluation runs
    it first, so the alerts of the same instant see what it wrote, as Prometheus orders a
    group's rules; its failures join the evaluation's ``errors`` under the record's name.
    """

    def __init__(
        self,
        config: AlertConfig | Sequence[Rule],
        source: QuerySource,
        *,
        state_file: str | Path | None = None,
        dispatcher: Dispatcher | None = None,
        max_alerts_per_rule: int = 10_000,
        recorder: Recorder | None = None,
    ) -> None:
        self.config = config if isinstance(config, AlertConfig) else AlertConfig(list(config))
        self.source = source
        self.recorder = recorder
        self.max_alerts_per_rule = max_alerts_per_rule
        self.rules = {rule.name: rule for rule in self.config.rules}
        for rule in self.config.rules:
            for name in rule.notify:
                if name not in self.config.receivers:
                    raise AlertRuleError(
                        self.config.source, f"rule {rule.name!r}", "notify", f"no notifier named {name!r}"
                    )
        self._own_dispatcher = dispatcher is None
        self.dispatcher = dispatcher if dispatcher is not None else Dispatcher(self.config.receivers)
        self._health = {name: RuleHealth(name) for name in self.rules}
        self._alerts: dict[str, dict[str, Alert]] = {name: {} for name in self.rules}
        self._lock = threading.Lock()
        self._evaluating = threading.Lock()
        self.state_errors = 0
        self._state = StateFile(state_file) if state_file is not None else None
        if self._state is not None:
            self._restore(self._state)
        if self._own_dispatcher:
            self.dispatcher.start()

    def _restore(self, state: StateFile) -> None:
        for alert in state.load():
            if alert.rule in self._alerts:
                self._alerts[alert.rule][alert.series] = alert
            else:
                log.info("alert %s %s dropped: its rule is gone", alert.rule, alert.series)

    def close(self, timeout: float = 10.0) -> None:
        if self._own_dispatcher:
            self.dispatcher.close(timeout)

    def __enter__(self) -> AlertEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def alerts(self) -> list[Alert]:
        """The pending and firing alerts (copies), by rule and series."""
        with self._lock:
            return [_copy(a) for name in sorted(self._alerts) for _, a in sorted(self._alerts[name].items())]

    def health(self) -> list[RuleHealth]:
        with self._lock:
            return [replace(self._health[name]) for name in sorted(self._health)]

    def run(self, stop: threading.Event, report: Callable[[Evaluation], None] | None = None) -> None:
        """Evaluate every ``config.interval_ms`` until ``stop`` is set; ``report`` sees each
        :class:`Evaluation`."""
        interval_s = self.config.interval_ms / 1000
        while not stop.is_set():
            started = time.monotonic()
            evaluation = self.evaluate()
            if report is not None:
                report(evaluation)
            stop.wait(max(0.0, interval_s - (time.monotonic() - started)))

    def evaluate(self, now_ms: int | None = None) -> Evaluation:
        """Evaluate every rule as of ``now_ms`` (default: the wall clock)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        evaluation = Evaluation(now)
        with self._evaluating:
            if self.recorder is not None:
                evaluation.errors.update(self.recorder.evaluate(now))
            for rule in self.config.rules:
                self._evaluate_rule(rule, now, evaluation)
            if self._state is not None and (evaluation.transitions or evaluation.notifications):
                self._save(self._state, now)
        for notification in evaluation.notifications:
            self.dispatcher.submit(notification, self.rules[notification.rule].notify)
        return evaluation

    def _save(self, state: StateFile, now: int) -> None:
        try:
            state.save(self.alerts(), now)
        except OSError as exc:  # the next evaluation saves again; alerting goes on meanwhile
            self.state_errors += 1
            log.error("cannot save the alert state to %s: %s", state.path, exc)

    def _evaluate_rule(self, rule: Rule, now: int, evaluation: Evaluation) -> None:
        started = time.perf_counter()
        current, error = None, None
        try:
            current = self._true_series(rule, self.source.query(rule.expr, None, now))
        except Exception as exc:  # any failure of the source (HTTP down, a bad answer, a query error)
            error = f"{type(exc).__name__}: {exc}"
            log.warning("rule %s: evaluation failed, its alerts kept as they were: %s", rule.name, error)
            evaluation.errors[rule.name] = error
        with self._lock:
            if current is not None:
                self._advance(rule, current, now, evaluation)
            health = self._health[rule.name]
            health.evaluations += 1
            health.errors += error is not None
            health.last_error = error
            health.last_evaluated_ms = now
            health.last_duration_s = time.perf_counter() - started
            health.active_alerts = len(self._alerts[rule.name])

    def _true_series(self, rule: Rule, result: Matrix | float) -> dict[str, tuple[dict[str, str], float]]:
        """Series key to (labels, last value) for the series where the rule is true."""
        if not isinstance(result, Matrix):
            value = float(result)
            holds = rule.condition.holds(np.array([value]))[0] if rule.condition else value == value
            return {"": ({}, value)} if holds else {}
        if result.values.shape[1] == 0:
            return {}
        last = aggregate("last", result.values, 1)
        rows = np.flatnonzero(rule.condition.holds(last) if rule.condition else ~np.isnan(last))
        if len(rows) > self.max_alerts_per_rule:
            raise QueryLimitError(
                f"{len(rows)} series are true, more than max_alerts_per_rule={self.max_alerts_per_rule}"
            )
        return {
            format_series(result.names[i], result.labels[i]): (result.labels[i], float(last[i]))
            for i in rows.tolist()
        }

    def _advance(
        self, rule: Rule, current: dict[str, tuple[dict[str, str], float]], now: int, evaluation: Evaluation
    ) -> None:
        alerts = self._alerts[rule.name]
        repeat_ms = rule.repeat_interval_ms or self.config.repeat_interval_ms
        changed: list[tuple[Alert, AlertState]] = []
        firing: list[Alert] = []
        resolved: list[Alert] = []
        for series, (labels, value) in current.items():
            alert = alerts.get(series)
            previous = AlertState.INACTIVE if alert is None else alert.state
            if alert is None:
                alert = alerts[series] = Alert(rule.name, series, {}, AlertState.PENDING, value, now)
            alert.labels = {**labels, **rule.labels, "alertname": rule.alert_name}
            alert.value = value
            alert.keep_firing_since_ms = None
            if alert.state is AlertState.PENDING and now - alert.active_since_ms >= rule.for_ms:
                alert.state, alert.fired_ms = AlertState.FIRING, now
            if alert.state is not previous:
                changed.append((alert, previous))
            due = alert.last_notified_ms is None or now - alert.last_notified_ms >= repeat_ms
            if alert.state is AlertState.FIRING and due:
                firing.append(alert)
        for series in [s for s in alerts if s not in current]:
            alert = alerts[series]
            if alert.state is AlertState.FIRING and rule.keep_firing_for_ms:
                if alert.keep_firing_since_ms is None:
                    alert.keep_firing_since_ms = now
                if now - alert.keep_firing_since_ms < rule.keep_firing_for_ms:
                    if alert.last_notified_ms is None or now - alert.last_notified_ms >= repeat_ms:
                        firing.append(alert)
                    continue
            del alerts[series]
            previous = alert.state
            if previous is AlertState.PENDING:
                alert.state = AlertState.INACTIVE
            else:
                alert.state, alert.resolved_ms = AlertState.RESOLVED, now
                resolved.append(alert)
            changed.append((alert, previous))
        for alert in {id(a): a for a in [*(a for a, _ in changed), *firing]}.values():
            alert.annotations = self._annotations(rule, alert)
        evaluation.transitions.extend(Transition(_copy(a), previous, now) for a, previous in changed)
        if rule.notify:
            for status, group in (("firing", firing), ("resolved", resolved)):
                if group:
                    for alert in group:
                        alert.last_notified_ms = now
                    evaluation.notifications.append(
                        Notification(rule.name, status, tuple(_copy(a) for a in group), now)
                    )

    def _annotations(self, rule: Rule, alert: Alert) -> dict[str, str]:
        context = {
            "labels": alert.labels,
            "value": alert.value,
            "series": alert.series,
            "rule": rule.name,
            "state": alert.state.value,
            "active_since": iso_time(alert.active_since_ms),
        }
        return {name: render(template, context) for name, template in rule.annotations.items()}


def _copy(alert: Alert) -> Alert:
    return replace(alert, labels=dict(alert.labels), annotations=dict(alert.annotations))
