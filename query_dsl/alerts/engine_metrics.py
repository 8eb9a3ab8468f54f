"""An alert engine's own metrics, for a ``/metrics`` page (``artimon up`` adds them to its
query API's): per rule, evaluations, failed ones, the last one's duration and the alerts
it holds; per notifier, what was delivered, retried, given up and dropped (a full queue).
A prometheus_client collector: the figures are read from the engine at each scrape."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from query_dsl.alerts.engine import AlertEngine

__all__ = ["AlertEngineMetrics"]


class AlertEngineMetrics:
    """The metrics of ``engine``, or only ``artimon_alert_rules 0`` without one (a stack
    with no rules file still answers the dashboard's panel)."""

    def __init__(self, engine: AlertEngine | None) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        rules = GaugeMetricFamily("artimon_alert_rules", "alerting and recording rules loaded")
        rules.add_metric([], len(self.engine.rules) if self.engine else 0)
        yield rules
        if self.engine is None:
            return
        evaluations = CounterMetricFamily(
            "artimon_alert_rule_evaluations", "evaluations of each rule", labels=["rule"]
        )
        errors = CounterMetricFamily(
            "artimon_alert_rule_evaluation_failures", "evaluations whose query failed", labels=["rule"]
        )
        duration = GaugeMetricFamily(
            "artimon_alert_rule_last_duration_seconds", "the last evaluation's time", labels=["rule"]
        )
        active = GaugeMetricFamily(
            "artimon_alerts_active", "alerts pending or firing, per rule", labels=["rule"]
        )
        for health in self.engine.health():
            evaluations.add_metric([health.rule], health.evaluations)
            errors.add_metric([health.rule], health.errors)
            duration.add_metric([health.rule], health.last_duration_s)
            active.add_metric([health.rule], health.active_alerts)
        yield from (evaluations, errors, duration, active)
        kinds = {
            "delivered": "notifications delivered",
            "failed_attempts": "delivery attempts that failed (retried while the policy allows)",
            "given_up": "notifications given up after their retries",
            "dropped": "notifications dropped: the notifier's queue was full, or it was closed",
        }
        families = {
            kind: CounterMetricFamily(f"artimon_alert_notifications_{kind}", text, labels=["notifier"])
            for kind, text in kinds.items()
        }
        for notifier, stats in sorted(self.engine.dispatcher.stats().items()):
            for kind, family in families.items():
                family.add_metric([notifier], getattr(stats, kind))
        yield from families.values()
