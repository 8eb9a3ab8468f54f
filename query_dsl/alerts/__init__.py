"""Alerting on query results (and Prometheus rule files: PromQL alerts, recording rules
written back into VHMS): rules (a query, a condition, a ``for`` duration, labels,
annotation templates, notifiers) evaluated every interval, an alert per series with states
pending, firing and resolved, kept across restarts, notified by mail, webhook or command.

From a rules file (``artimon alerts -f rules.yaml`` does this)::

    config = load_rules("rules.yaml")
    with Client("http://localhost:8080") as client:
        with AlertEngine(config, client, state_file="alerts-state.json") as engine:
            engine.run(stop_event)

See docs/alerts.md.
"""

from __future__ import annotations

from query_dsl.alerts.dispatch import DeliveryStats, Dispatcher, Receiver, RetryPolicy
from query_dsl.alerts.engine import AlertEngine, Evaluation, RuleHealth
from query_dsl.alerts.engine_metrics import AlertEngineMetrics
from query_dsl.alerts.fields import Fields
from query_dsl.alerts.model import Alert, AlertState, Notification, Transition, iso_time
from query_dsl.alerts.notifiers import (
    AlertmanagerNotifier,
    CommandNotifier,
    EmailNotifier,
    Notifier,
    WebhookNotifier,
    register_notifier,
)
from query_dsl.alerts.recording import Recorder, SampleWriter
from query_dsl.alerts.rules import (
    DEMO_RULES,
    AlertConfig,
    Condition,
    RecordingRule,
    Rule,
    load_rules,
    parse_rules,
    rules_from_dict,
)
from query_dsl.alerts.source import EvaluatorSource, PromQLHttpSource, PromQLSource, QuerySource
from query_dsl.alerts.state import StateFile
from query_dsl.exceptions import AlertRuleError, NotifyError

__all__ = [
    "DEMO_RULES",
    "Alert",
    "AlertConfig",
    "AlertEngine",
    "AlertEngineMetrics",
    "AlertRuleError",
    "AlertState",
    "AlertmanagerNotifier",
    "CommandNotifier",
    "Condition",
    "DeliveryStats",
    "Dispatcher",
    "EmailNotifier",
    "Evaluation",
    "EvaluatorSource",
    "Fields",
    "Notification",
    "Notifier",
    "NotifyError",
    "PromQLHttpSource",
    "PromQLSource",
    "QuerySource",
    "Receiver",
    "Recorder",
    "RecordingRule",
    "RetryPolicy",
    "Rule",
    "RuleHealth",
    "SampleWriter",
    "StateFile",
    "Transition",
    "WebhookNotifier",
    "iso_time",
    "load_rules",
    "parse_rules",
    "register_notifier",
    "rules_from_dict",
]
