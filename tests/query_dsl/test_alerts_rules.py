"""The rules file: what a valid one gives, and every kind of bad one refused up front with
the file, the rule and the key named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from query_dsl import QueryError
from query_dsl.alerts import (
    AlertRuleError,
    CommandNotifier,
    Condition,
    EmailNotifier,
    WebhookNotifier,
    load_rules,
    parse_rules,
)
from query_dsl.alerts.rules import MAX_RULES_FILE_BYTES

FULL = """
interval: 30s
repeat_interval: 2h
notifiers:
  ops-mail:
    type: email
    to: [ops@example.com, oncall@example.com]
    from: "Artimon <artimon@example.com>"
    smtp_host: mail.example.com
    smtp_port: 587
    starttls: true
    username: artimon
    password: ${SMTP_PASSWORD}
  hook:
    type: webhook
    url: https://chat.example.com/hooks/${HOOK_TOKEN}
    timeout: 5s
    retries: 5
    backoff: 500ms
    headers: {Authorization: "Bearer ${HOOK_TOKEN}"}
  script:
    type: command
    argv: [/usr/local/bin/page, --team, ops]
    timeout: 1m
rules:
  - name: AnyDown
    expr: fetch("app.up", last=5m) == 0
    notify: [script]
groups:
  - name: disks
    rules:
      - name: DiskFull
        expr: |
          fetch("disk.used", last=5m)
            / fetch("disk.size", last=5m)
        condition: "> 0.9"
        for: 5m
        repeat_interval: 30m
        labels: {severity: page}
        annotations:
          summary: "{{ labels.host }} is {{ (value * 100) | round(1) }}% full"
        notify: [ops-mail, hook]
"""
ENV = {"SMTP_PASSWORD": "s3cret", "HOOK_TOKEN": "t0k"}


def test_a_full_file_reads_into_rules_and_notifiers(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(FULL)
    config = load_rules(path, environ=ENV)
    assert config.interval_ms == 30_000 and config.repeat_interval_ms == 7_200_000
    assert config.source == str(path)
    any_down, disk = config.rules
    assert any_down.condition is None and any_down.for_ms == 0 and any_down.group == ""
    assert disk.name == "DiskFull" and disk.group == "disks" and disk.condition == Condition(">", 0.9)
    assert disk.for_ms == 300_000 and disk.repeat_interval_ms == 1_800_000
    assert disk.labels == {"severity": "page"} and disk.notify == ("ops-mail", "hook")
    mail = config.receivers["ops-mail"].notifier
    assert isinstance(mail, EmailNotifier) and mail.password == "s3cret" and mail.smtp_port == 587
    hook = config.receivers["hook"]
    assert isinstance(hook.notifier, WebhookNotifier)
    assert hook.notifier.url == "https://chat.example.com/hooks/t0k" and hook.notifier.timeout == 5.0
    assert hook.notifier.headers == {"Authorization": "Bearer t0k"}
    assert hook.retry.retries == 5 and hook.retry.backoff_s == 0.5 and hook.retry.delay_s(3) == 2.0
    script = config.receivers["script"].notifier
    assert isinstance(script, CommandNotifier) and script.argv[0] == "/usr/local/bin/page"


def test_conditions() -> None:
    values = np.array([0.5, 0.9, 1.0, np.nan])
    assert Condition.parse(">0.9").holds(values).tolist() == [False, False, True, False]
    assert Condition.parse("  <=  0.9 ").holds(values).tolist() == [True, True, False, False]
    assert Condition.parse("!= 1").holds(values).tolist() == [True, True, False, False]
    assert str(Condition.parse("== 1e3")) == "== 1000"
    for bad in ["> ninety", "=> 1", "> nan", "90", ""]:
        with pytest.raises(ValueError):
            Condition.parse(bad)


def rules_of(rule: str, notifiers: str = "") -> str:
    return f"{notifiers}\nrules:\n  - name: R\n    expr: fetch('x')\n" + "".join(
        f"    {line}\n" for line in rule.strip().splitlines()
    )


@pytest.mark.parametrize(
    ("text", "rule", "field", "message"),
    [
        ("rules: [", None, None, "not valid YAML"),
        ("a: b: c", None, None, "not valid YAML"),
        ("- just\n- a list", None, None, "expected a mapping"),
        ("", None, None, "is empty"),
        ("interval: 1m", None, None, "has no rules"),
        (
            "rulez: []",
            None,
            None,
            "unknown key rulez (known: groups, interval, notifiers, repeat_interval, rules)",
        ),
        ("interval: 5 minutes\nrules: []", None, "interval", "is not a duration"),
        ("interval: 300\nrules: []", None, "interval", "expected a duration like 30s"),
        ("interval: 10ms\nrules: []", None, "interval", "must be between 1000 ms"),
        ("rules: {name: R}", None, "rules", "expected a list"),
        ("rules: [R]", "rule #1", None, "expected a mapping"),
        ("rules: [{expr: x}]", "rule #1", "name", "is required"),
        ("rules: [{name: 'two words', expr: x}]", "rule #1", "name", "is not a name"),
        ("rules: [{name: R}]", "rule 'R'", "expr", "is required"),
        ("rules: [{name: R, expr: 'fetch(\"x\"'}]", "rule 'R'", "expr", "the query ends too early at line 1"),
        (
            "rules:\n- name: R\n  expr: |\n    fetch('x')\n    | map(rate,, 5m)",
            "rule 'R'",
            "expr",
            "line 2, column 12",
        ),
        ("rules: [{name: R, expr: [1]}]", "rule 'R'", "expr", "expected text, got list"),
        (rules_of("condition: '~ 3'"), "rule 'R'", "condition", "is not a condition"),
        (rules_of("condition: 90"), "rule 'R'", "condition", "expected text, got int"),
        (rules_of("for: 5 m"), "rule 'R'", "for", "is not a duration"),
        (rules_of("for: 1.5h"), "rule 'R'", "for", "is not a duration"),
        (rules_of("labels: {severity: 1}"), "rule 'R'", "labels", "quote numbers"),
        (rules_of("labels: {'bad key': x}"), "rule 'R'", "labels", "invalid label key"),
        (rules_of("labels: {alertname: x}"), "rule 'R'", "labels", "alertname is the rule's name"),
        (
            rules_of("annotations: {s: '{{ labels.host '}"),
            "rule 'R'",
            "annotations.s",
            "template error at line 1",
        ),
        (
            rules_of("notify: [pager]"),
            "rule 'R'",
            "notify",
            "no notifier named 'pager' (known: none declared)",
        ),
        (rules_of("notify: pager"), "rule 'R'", "notify", "expected a list of text"),
        (rules_of("severity: page"), "rule 'R'", None, "unknown key severity (known: annotations, condition"),
        (
            "rules: [{name: R, expr: '1'}, {name: R, expr: '2'}]",
            "rule 'R'",
            "name",
            "is used by another rule already",
        ),
        ("groups: [{rules: []}]", "groups[0]", "name", "is required"),
        ("groups: [{name: g, rules: [], interval: 1m}]", "groups[0]", None, "unknown key interval"),
        (rules_of("", "notifiers: [a]"), None, "notifiers", "expected a mapping of names"),
        (rules_of("", "notifiers: {n: {url: x}}"), "notifier 'n'", "type", "is required"),
        (
            rules_of("", "notifiers: {n: {type: pager}}"),
            "notifier 'n'",
            "type",
            "unknown notifier type 'pager'",
        ),
        (rules_of("", "notifiers: {n: {type: 'no.such:Thing'}}"), "notifier 'n'", "type", "cannot be loaded"),
        (rules_of("", "notifiers: {n: {type: webhook}}"), "notifier 'n'", "url", "is required"),
        (
            rules_of("", "notifiers: {n: {type: webhook, url: 'ftp://x'}}"),
            "notifier 'n'",
            "url",
            "not an http",
        ),
        (
            rules_of("", "notifiers: {n: {type: webhook, url: 'http://x', verb: PUT}}"),
            "notifier 'n'",
            None,
            "unknown key verb",
        ),
        (
            rules_of("", "notifiers: {n: {type: webhook, url: 'http://x/${NOPE}'}}"),
            "notifier 'n'",
            "url",
            "refers to ${NOPE}, which is not set",
        ),
        (
            rules_of("", "notifiers: {n: {type: webhook, url: 'http://x', retries: -1}}"),
            "notifier 'n'",
            "retries",
            "must be between 0 and 100",
        ),
        (
            rules_of("", "notifiers: {n: {type: webhook, url: 'http://x', timeout: 1h}}"),
            "notifier 'n'",
            "timeout",
            "must be between 100 ms and 600000 ms",
        ),
        (rules_of("", "notifiers: {n: {type: command, argv: []}}"), "notifier 'n'", "argv", "is empty"),
        (
            rules_of("", "notifiers: {n: {type: email, to: [nobody], from: a@b}}"),
            "notifier 'n'",
            "to",
            "'nobody' is not a mail address",
        ),
        (
            rules_of("", "notifiers: {n: {type: email, to: [a@b], from: a@b, username: u, password: p}}"),
            "notifier 'n'",
            "username",
            "set starttls: true",
        ),
        (
            rules_of("", "notifiers: {n: {type: email, to: [a@b], from: a@b, username: u, starttls: true}}"),
            "notifier 'n'",
            "username",
            "both username and password",
        ),
    ],
)
def test_bad_rules_are_refused_naming_rule_and_field(
    text: str, rule: str | None, field: str | None, message: str
) -> None:
    with pytest.raises(AlertRuleError) as caught:
        parse_rules(text, "rules.yaml", environ={})
    error = caught.value
    assert message in str(error), str(error)
    assert (error.source, error.rule, error.field) == ("rules.yaml", rule, field), str(error)
    assert str(error).startswith("rules.yaml: ")
    assert isinstance(error, QueryError) and isinstance(error, ValueError)


def test_garbage_bytes_and_oversized_and_missing_files(tmp_path: Path) -> None:
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(AlertRuleError, match="is not UTF-8 text"):
        load_rules(binary)
    huge = tmp_path / "huge.yaml"
    huge.write_text("# padding\n" * (MAX_RULES_FILE_BYTES // 10 + 1))
    with pytest.raises(AlertRuleError, match=f"larger than {MAX_RULES_FILE_BYTES} bytes"):
        load_rules(huge)
    with pytest.raises(AlertRuleError, match="cannot read the rules file: No such file"):
        load_rules(tmp_path / "absent.yaml")
    with pytest.raises(AlertRuleError, match=r"nests too deeply|not valid YAML"):
        parse_rules("[" * 100_000)


def test_yaml_tags_that_build_objects_are_refused() -> None:
    with pytest.raises(AlertRuleError, match="not valid YAML"):
        parse_rules("rules: !!python/object/apply:os.system ['true']")


def test_the_example_rules_file_is_valid() -> None:
    example = Path(__file__).parents[2] / "docs" / "examples" / "alerts.yaml"
    config = load_rules(example)
    assert [r.name for r in config.rules] == [
        "HotRack",
        "SlowRequests",
        "ServerErrors",
        "DiskAlmostFull",
        "AppDown",
    ]
