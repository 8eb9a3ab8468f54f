"""The rules file (YAML, shaped like Prometheus' so it reads familiar) into an
:class:`AlertConfig`, everything checked before the first evaluation.

::

    interval: 1m              # how often every rule is evaluated (default 1m)
    repeat_interval: 4h       # a firing alert is notified again this often (default 4h)
    notifiers:
      ops-mail: {type: email, to: [ops@example.com], from: artimon@example.com, smtp_host: mail}
      hook: {type: webhook, url: "https://chat.example.com/hooks/${HOOK_TOKEN}", retries: 5}
    rules:                    # and/or groups: [{name: disks, rules: [...]}]
      - name: DiskFull
        expr: fetch("disk.used", last=5m) / fetch("disk.size", last=5m)
        condition: "> 0.9"    # on each series' last value; absent: every series fires
        for: 5m
        labels: {severity: page}
        annotations: {summary: "{{ labels.host }} {{ labels.volume }} is {{ value * 100 }}% full"}
        notify: [ops-mail, hook]

A Prometheus rule file (``groups:`` of ``alert:`` and ``record:`` rules, PromQL
expressions) is read too: :mod:`query_dsl.alerts.prom_rules` turns it into the same
:class:`AlertConfig`, with ``language`` ``"promql"`` and its recording rules.

Every rejection is an :class:`~query_dsl.AlertRuleError` naming the file, the rule or
notifier, and the key. docs/alerts.md has the full reference.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bookkeeper import InvalidLabelError
from bookkeeper.wire import validate_labels
from query_dsl.alerts.dispatch import Receiver, RetryPolicy
from query_dsl.alerts.fields import Fields
from query_dsl.alerts.notifiers import resolve
from query_dsl.alerts.templates import check_template
from query_dsl.apply import COMPARISONS
from query_dsl.exceptions import AlertRuleError, QuerySyntaxError
from query_dsl.parser import parse

__all__ = [
    "DEMO_RULES",
    "MAX_RULES",
    "MAX_RULES_FILE_BYTES",
    "AlertConfig",
    "Condition",
    "RecordingRule",
    "Rule",
    "load_rules",
    "parse_rules",
    "rules_from_dict",
]

MAX_RULES_FILE_BYTES = 1 << 20
# the shipped example: rules over the series of ``artimon up --demo``
DEMO_RULES = Path(__file__).parent / "examples" / "demo.yaml"
MAX_RULES = 10_000
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]{0,199}\Z")
_CONDITION = re.compile(r"\s*(==|!=|>=|<=|>|<)\s*(\S+)\s*\Z")


@dataclass(frozen=True)
class Condition:
    """A comparison of each series' last value with a threshold: ``Condition.parse("> 90")``."""

    op: str
    threshold: float

    def __post_init__(self) -> None:
        if self.op not in COMPARISONS:
            raise ValueError(f"a condition compares with one of {' '.join(COMPARISONS)}, got {self.op!r}")
        if math.isnan(self.threshold):
            raise ValueError("a condition's threshold cannot be NaN")

    @classmethod
    def parse(cls, text: str) -> Condition:
        match = _CONDITION.match(text)
        if match is None:
            raise ValueError(f"{text!r} is not a condition like '> 90', '<= 0' or '== 1'")
        try:
            threshold = float(match[2])
        except ValueError:
            raise ValueError(f"{match[2]!r} in {text!r} is not a number") from None
        return cls(match[1], threshold)

    def holds(self, values: np.ndarray) -> np.ndarray:
        """Where the condition is true (never where a value is NaN)."""
        with np.errstate(invalid="ignore"):
            truth = COMPARISONS[self.op](values, np.full_like(values, self.threshold))
        holds: np.ndarray = truth & ~np.isnan(values)
        return holds

    def __str__(self) -> str:
        return f"{self.op} {self.threshold:g}"


@dataclass(frozen=True)
class Rule:
    """One alerting rule. ``expr`` is a query; each series of its result whose last value
    meets ``condition`` (any value at all when ``None``) is an alert, firing once it has
    held for ``for_ms``. ``annotations`` are templates (:mod:`query_dsl.alerts.templates`);
    ``notify`` names notifiers; ``repeat_interval_ms`` overrides the file's. A firing alert
    whose series is gone keeps firing for ``keep_firing_for_ms`` (Prometheus's
    ``keep_firing_for``). ``alertname`` is the alerts' ``alertname`` label, the rule's
    ``name`` unless set (a Prometheus file may give several rules one alert name; ``name``
    stays unique)."""

    name: str
    expr: str
    condition: Condition | None = None
    for_ms: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    notify: tuple[str, ...] = ()
    repeat_interval_ms: int | None = None
    group: str = ""
    keep_firing_for_ms: int = 0
    alertname: str = ""

    @property
    def alert_name(self) -> str:
        return self.alertname or self.name


@dataclass(frozen=True)
class RecordingRule:
    """A Prometheus recording rule: ``expr`` (PromQL) evaluated each interval, every series
    of its result written back into VHMS as ``record`` with its labels and ``labels``."""

    record: str
    expr: str
    labels: Mapping[str, str] = field(default_factory=dict)
    group: str = ""


@dataclass
class AlertConfig:
    """The rules, the notifiers they may name (as receivers) and the timings; ``language``
    is the query language of every ``expr`` (``dsl``, or ``promql`` for a Prometheus rule
    file, which may also hold ``recording`` rules)."""

    rules: list[Rule]
    receivers: dict[str, Receiver] = field(default_factory=dict)
    interval_ms: int = 60_000
    repeat_interval_ms: int = 4 * 3_600_000
    source: str = "<rules>"
    language: str = "dsl"
    recording: list[RecordingRule] = field(default_factory=list)


def load_rules(path: str | Path, *, environ: Mapping[str, str] | None = None) -> AlertConfig:
    """Read and check a rules file (at most ``MAX_RULES_FILE_BYTES``); ``environ`` (default
    ``os.environ``) resolves ``${NAME}`` in notifier settings."""
    source = str(path)
    try:
        with open(path, "rb") as rules_file:
            data = rules_file.read(MAX_RULES_FILE_BYTES + 1)
    except OSError as exc:
        raise AlertRuleError(
            source, None, None, f"cannot read the rules file: {exc.strerror or exc}"
        ) from None
    return parse_rules(data, source, environ=environ)


def parse_rules(
    text: str | bytes, source: str = "<string>", *, environ: Mapping[str, str] | None = None
) -> AlertConfig:
    """Check rules given as YAML text."""
    size = len(text.encode() if isinstance(text, str) else text)
    if size > MAX_RULES_FILE_BYTES:
        raise AlertRuleError(source, None, None, f"is larger than {MAX_RULES_FILE_BYTES} bytes")
    try:
        document = yaml.safe_load(text.decode("utf-8") if isinstance(text, bytes) else text)
    except UnicodeDecodeError as exc:
        raise AlertRuleError(source, None, None, f"is not UTF-8 text: {exc}") from None
    except yaml.YAMLError as exc:
        raise AlertRuleError(source, None, None, f"is not valid YAML: {exc}") from None
    except RecursionError:
        raise AlertRuleError(source, None, None, "nests too deeply to be a rules file") from None
    if document is None:
        raise AlertRuleError(source, None, None, "is empty")
    return rules_from_dict(document, source, environ=environ)


def rules_from_dict(
    data: object, source: str = "<dict>", *, environ: Mapping[str, str] | None = None
) -> AlertConfig:
    """Check rules given as Python data shaped like the YAML file (ours, or Prometheus's)."""
    from query_dsl.alerts import prom_rules  # it builds on this module's Rule and AlertConfig

    if prom_rules.is_prometheus_rules(data):
        return prom_rules.rules_from_prometheus(data, source)
    top = Fields(data, source, None, environ=os.environ if environ is None else environ)
    interval = top.duration_ms("interval", 60_000, low_ms=1000)
    repeat = top.duration_ms("repeat_interval", 4 * 3_600_000, low_ms=1000)
    receivers = _receivers(top)
    entries: list[tuple[str, object]] = [("", entry) for entry in _list(top, "rules")]
    for index, group in enumerate(_list(top, "groups")):
        group_fields = Fields(group, source, f"groups[{index}]")
        group_name = _name(group_fields, "name")
        entries.extend((group_name, entry) for entry in _list(group_fields, "rules"))
        group_fields.finish()
    top.finish()
    if not entries:
        raise AlertRuleError(source, None, None, "has no rules (give rules: or groups:)")
    if len(entries) > MAX_RULES:
        raise AlertRuleError(source, None, None, f"has {len(entries)} rules, more than {MAX_RULES}")
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, (group_name, entry) in enumerate(entries):
        rule = _rule(Fields(entry, source, f"rule #{index + 1}"), group_name, receivers)
        if rule.name in seen:
            raise AlertRuleError(source, f"rule {rule.name!r}", "name", "is used by another rule already")
        seen.add(rule.name)
        rules.append(rule)
    return AlertConfig(rules, receivers, interval, repeat, source)


def _list(fields: Fields, key: str) -> list[Any]:
    value = fields.raw(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise fields.error(key, f"expected a list, got {type(value).__name__}")
    return value


def _name(fields: Fields, key: str) -> str:
    name = fields.text(key)
    if not _NAME.match(name):
        raise fields.error(
            key,
            f"{name!r} is not a name: letters, digits, '_', '.', ':' or '-', starting with a letter or '_'",
        )
    return name


def _receivers(top: Fields) -> dict[str, Receiver]:
    declared = top.raw("notifiers")
    if declared is None:
        return {}
    if not isinstance(declared, Mapping):
        raise top.error(
            "notifiers", f"expected a mapping of names to settings, got {type(declared).__name__}"
        )
    receivers: dict[str, Receiver] = {}
    for name, settings in declared.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise top.error("notifiers", f"{name!r} is not a notifier name")
        fields = Fields(settings, top.source, f"notifier {name!r}", environ=top.environ)
        type_name = fields.text("type")
        retry = RetryPolicy(
            retries=fields.integer("retries", 3, 0, 100),
            backoff_s=fields.duration_ms("backoff", 1000, low_ms=1) / 1000,
            max_backoff_s=fields.duration_ms("max_backoff", 60_000, low_ms=1) / 1000,
        )
        try:
            notifier_type = resolve(type_name)
        except ValueError as exc:
            raise fields.error("type", str(exc)) from None
        notifier = notifier_type.from_options(name, fields)
        fields.finish()
        receivers[name] = Receiver(name, notifier, retry)
    return receivers


def _rule(fields: Fields, group: str, receivers: Mapping[str, Receiver]) -> Rule:
    name = _name(fields, "name")
    fields.owner = f"rule {name!r}"
    expr = fields.text("expr")
    try:
        parse(expr)
    except QuerySyntaxError as exc:
        raise fields.error("expr", str(exc)) from None
    condition = None
    if fields.has("condition"):
        try:
            condition = Condition.parse(fields.text("condition"))
        except ValueError as exc:
            raise fields.error("condition", str(exc)) from None
    labels = fields.text_map("labels")
    try:
        validate_labels(labels)
    except InvalidLabelError as exc:
        raise fields.error("labels", str(exc)) from None
    if "alertname" in labels:
        raise fields.error("labels", "alertname is the rule's name; it cannot be set")
    annotations = fields.text_map("annotations")
    for key, template in annotations.items():
        try:
            check_template(template)
        except ValueError as exc:
            raise fields.error(f"annotations.{key}", str(exc)) from None
    notify = fields.texts("notify", [])
    for target in notify:
        if target not in receivers:
            known = ", ".join(sorted(receivers)) or "none declared"
            raise fields.error("notify", f"no notifier named {target!r} (known: {known})")
    repeat = fields.duration_ms("repeat_interval", low_ms=1000) if fields.has("repeat_interval") else None
    rule = Rule(
        name=name,
        expr=expr,
        condition=condition,
        for_ms=fields.duration_ms("for", 0),
        labels=labels,
        annotations=annotations,
        notify=tuple(notify),
        repeat_interval_ms=repeat,
        group=group,
    )
    fields.finish()
    return rule
