"""Prometheus rule files (``groups:`` of ``alert:`` and ``record:`` rules, PromQL
expressions) into an :class:`~query_dsl.alerts.AlertConfig`, checked as ``promtool check
rules`` checks them (Prometheus's ``rulefmt``), plus what Artimon itself needs::

    groups:
      - name: example
        interval: 30s                 # optional; the file is evaluated at its smallest
        rules:
          - record: code:prometheus_http_requests_total:sum
            expr: sum by (code) (prometheus_http_requests_total)
          - alert: HighRequestLatency
            expr: job:request_latency_seconds:mean5m{job="myjob"} > 0.5
            for: 10m
            keep_firing_for: 5m
            labels: {severity: page}
            annotations:
              summary: "High request latency on {{ $labels.instance }} ({{ $value }}s)"

A file is taken for a Prometheus one when a rule of its groups has ``alert:`` or
``record:`` (Artimon's own rules have ``name:``). Refused, each an
:class:`~query_dsl.AlertRuleError` naming the group, the rule (its place and name) and the
key, with promtool's wording where promtool refuses the same: a key outside
Prometheus's (``groups`` at the top; ``name interval limit rules`` in a group; ``record
alert expr for keep_firing_for labels annotations`` in a rule), a group without a name or
with a name used before, a rule with both or neither of ``record`` and ``alert``, no
``expr``, an ``expr`` that is not PromQL (with its line and column), ``for``,
``keep_firing_for`` or ``annotations`` on a recording rule, a record name that is not a
Prometheus metric name (an alert name may be any text), a label or annotation name that
is not a Prometheus label name (or ``__name__``), a duration Prometheus would not read
(``1h30m``, ``5m``, ``0`` are read).
And, where Artimon differs (promtool accepts these): a record name starting with ``:`` or
a label that breaks the bookkeeper's rules (length, control characters), a label value
with a template, an annotation template outside the translated subset
(:mod:`query_dsl.alerts.go_templates`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from bookkeeper import BookkeeperError
from bookkeeper.ground import parse_duration
from bookkeeper.wire import validate_labels, validate_name
from query_dsl.alerts.fields import Fields
from query_dsl.alerts.go_templates import translate
from query_dsl.alerts.rules import MAX_RULES, AlertConfig, RecordingRule, Rule
from query_dsl.alerts.templates import check_template
from query_dsl.exceptions import AlertRuleError, QuerySyntaxError
from query_dsl.promql import parse

__all__ = ["describe", "is_prometheus_rules", "rules_from_prometheus"]

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
DEFAULT_INTERVAL_MS = 60_000  # Prometheus's global evaluation_interval


def is_prometheus_rules(data: object) -> bool:
    """Whether ``data`` (a parsed rules file) is shaped like a Prometheus rule file."""
    if not isinstance(data, Mapping) or not isinstance(data.get("groups"), list):
        return False
    for group in data["groups"]:
        rules = group.get("rules") if isinstance(group, Mapping) else None
        if isinstance(rules, list) and any(
            isinstance(r, Mapping) and ("alert" in r or "record" in r) for r in rules
        ):
            return True
    return False


def _duration(fields: Fields, key: str) -> int:
    value = fields.raw(key)
    if value is None:
        return 0
    text = str(value)
    if text == "0":
        return 0
    try:
        return parse_duration(text)
    except ValueError:
        raise fields.error(key, f'not a valid duration string: "{text}"') from None


def _labels(fields: Fields, key: str, *, templates_allowed: bool) -> dict[str, str]:
    raw = fields.raw(key)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise fields.error(key, f"expected a mapping of names to text, got {type(raw).__name__}")
    out: dict[str, str] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or name == "__name__" or not _LABEL_NAME.match(name):
            what = "annotation" if key == "annotations" else "label"
            raise fields.error(key, f"invalid {what} name: {name}")
        if value is None:
            value = ""
        if not isinstance(value, str | int | float | bool):
            raise fields.error(f"{key}.{name}", f"expected text, got {type(value).__name__}")
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if not templates_allowed and "{{" in text:
            raise fields.error(f"{key}.{name}", "templated label values are not supported by Artimon")
        out[name] = text
    return out


def _rule(
    fields: Fields, group: str, index: int, taken: set[str]
) -> tuple[Rule | None, RecordingRule | None]:
    record, alert = fields.raw("record"), fields.raw("alert")
    name = str(record if record is not None else alert if alert is not None else "")
    fields.owner = f"group {group!r}, rule {index}" + (f", {name!r}" if name else "")
    if record is not None and alert is not None:
        raise fields.error(None, "only one of 'record' and 'alert' must be set")
    if not name:
        raise fields.error(None, "one of 'record' or 'alert' must be set")
    expr = fields.raw("expr")
    if expr is None or str(expr).strip() == "":
        raise fields.error("expr", "field 'expr' must be set in rule")
    expr = str(expr)
    try:
        parse(expr)
    except QuerySyntaxError as exc:
        raise fields.error("expr", f"could not parse expression: {exc}") from None
    if record is not None:
        for key in ("annotations", "for", "keep_firing_for"):
            if fields.raw(key) is not None:
                raise fields.error(key, f"invalid field '{key}' in recording rule")
        if not _METRIC_NAME.match(name):
            raise fields.error("record", f"invalid recording rule name: {name}")
        try:
            validate_name(name)
            labels = validate_labels(_labels(fields, "labels", templates_allowed=False))
        except BookkeeperError as exc:
            raise fields.error("record", f"breaks Artimon's naming rules: {exc}") from None
        fields.finish()
        return None, RecordingRule(name, expr, labels, group)
    labels = _labels(fields, "labels", templates_allowed=False)
    try:
        validate_labels(labels)
    except BookkeeperError as exc:
        raise fields.error("labels", str(exc)) from None
    annotations = {}
    for key, template in _labels(fields, "annotations", templates_allowed=True).items():
        try:
            annotations[key] = translate(template)
            check_template(annotations[key])
        except ValueError as exc:
            raise fields.error(f"annotations.{key}", f"template: {exc}") from None
    for_ms = _duration(fields, "for")
    keep_ms = _duration(fields, "keep_firing_for")
    fields.finish()
    unique = name if name not in taken else f"{name}#{group}#{index}"
    taken.add(unique)
    rule = Rule(
        unique,
        expr,
        for_ms=for_ms,
        labels=labels,
        annotations=annotations,
        group=group,
        keep_firing_for_ms=keep_ms,
        alertname=name,
    )
    return rule, None


def rules_from_prometheus(data: object, source: str = "<dict>") -> AlertConfig:
    """Check a Prometheus rule file given as parsed YAML (see the module doc)."""
    top = Fields(data, source, None)
    groups = top.raw("groups")
    top.finish()
    if not isinstance(groups, list):
        raise top.error("groups", f"expected a list, got {type(groups).__name__}")
    rules: list[Rule] = []
    recording: list[RecordingRule] = []
    intervals: list[int] = []
    seen_groups: set[str] = set()
    taken: set[str] = set()
    for position, group in enumerate(groups):
        fields = Fields(group, source, f"groups[{position}]")
        name = fields.raw("name")
        if name is None or str(name) == "":
            raise fields.error("name", "Groupname must not be empty")
        name = str(name)
        if name in seen_groups:
            raise fields.error("name", f"{name}: groupname is repeated in the same file")
        seen_groups.add(name)
        fields.owner = f"group {name!r}"
        if fields.raw("interval") is not None:
            intervals.append(_duration(fields, "interval") or DEFAULT_INTERVAL_MS)
        limit = fields.raw("limit")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise fields.error("limit", f"{limit!r} is not a count")
        entries = fields.raw("rules") or []
        if not isinstance(entries, list):
            raise fields.error("rules", f"expected a list, got {type(entries).__name__}")
        fields.finish()
        for index, entry in enumerate(entries, start=1):
            rule, record = _rule(Fields(entry, source, f"group {name!r}, rule {index}"), name, index, taken)
            if rule is not None:
                rules.append(rule)
            if record is not None:
                recording.append(record)
    if len(rules) + len(recording) > MAX_RULES:
        raise AlertRuleError(source, None, None, f"has more than {MAX_RULES} rules")
    interval = min(intervals, default=DEFAULT_INTERVAL_MS)
    return AlertConfig(rules, {}, interval, source=source, language="promql", recording=recording)


def describe(config: AlertConfig) -> str:
    """promtool's summary line of a checked file."""
    return f"SUCCESS: {len(config.rules) + len(config.recording)} rules found"
