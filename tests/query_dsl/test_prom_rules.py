"""Prometheus rule files: checked as ``promtool check rules`` checks them (cross-checked
against the real promtool), Prometheus's documentation examples loaded and fired on our
data, recording rules written back into a real VHMS through its ingest client, alerts sent
to a real Alertmanager (Debian's ``prometheus-alertmanager``) by the ``alertmanager``
notifier, and the Go templates of annotations rendered as Prometheus does."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from artimon.servers import AlertmanagerServer
from bookkeeper.ground import BackgroundServer
from query_dsl import AlertRuleError, QueryError, create_app
from query_dsl.alerts import (
    AlertEngine,
    AlertState,
    EvaluatorSource,
    PromQLHttpSource,
    PromQLSource,
    Recorder,
    parse_rules,
    rules_from_dict,
)
from query_dsl.alerts.go_templates import go_float, humanize, humanize_duration, translate
from query_dsl.alerts.templates import render
from vhms import LocalClient, VhmsClient
from vhms.server import Store, VhmsService

# Prometheus's documentation: configuration/alerting_rules.md, configuration/recording_rules.md
# and configuration/template_examples.md
DOC_ALERTING = """
groups:
- name: example
  rules:
  - alert: HighRequestLatency
    expr: job:request_latency_seconds:mean5m{job="myjob"} > 0.5
    for: 10m
    keep_firing_for: 5m
    labels:
      severity: page
    annotations:
      summary: High request latency
"""
DOC_TEMPLATING = """
groups:
- name: example
  rules:

  # Alert for any instance that is unreachable for >5 minutes.
  - alert: InstanceDown
    expr: up == 0
    for: 5m
    labels:
      severity: page
    annotations:
      summary: "Instance {{ $labels.instance }} down"
      description: "{{ $labels.instance }} of job {{ $labels.job }} has been down for more than 5 minutes."

  # Alert for any instance that has a median request latency >1s.
  - alert: APIHighRequestLatency
    expr: api_http_request_latencies_second{quantile="0.5"} > 1
    for: 10m
    annotations:
      summary: "High request latency on {{ $labels.instance }}"
      description: "{{ $labels.instance }} has a median request latency above 1s (current value: {{ $value }}s)"
"""  # noqa: E501
DOC_RECORDING = """
groups:
  - name: example
    rules:
    - record: code:prometheus_http_requests_total:sum
      expr: sum by (code) (prometheus_http_requests_total)
"""


def rule_file(*rules: str, group: str = "name: g") -> str:
    return f"groups:\n- {group}\n  rules:\n" + "".join(f"  - {rule}\n" for rule in rules)


# (case, file, accepted by promtool and by us)
CASES = [
    ("doc-alerting", DOC_ALERTING, True),
    ("doc-templating", DOC_TEMPLATING, True),
    ("doc-recording", DOC_RECORDING, True),
    (
        "composite-durations",
        rule_file("alert: A\n    expr: up == 0\n    for: 1h30m\n    keep_firing_for: 0"),
        True,
    ),
    ("same-alert-twice", rule_file("alert: A\n    expr: up == 0", "alert: A\n    expr: up == 1"), True),
    (
        "group-interval",
        rule_file("record: a:b\n    expr: sum(up)", group="name: g\n  interval: 30s\n  limit: 3"),
        True,
    ),
    ("both", rule_file("alert: A\n    record: a\n    expr: up"), False),
    ("neither", rule_file("expr: up"), False),
    ("no-expr", rule_file("alert: A"), False),
    ("bad-expr", rule_file("alert: A\n    expr: sum(up"), False),
    ("bad-type", rule_file("alert: A\n    expr: rate(up)"), False),
    ("record-for", rule_file("record: a\n    expr: up\n    for: 5m"), False),
    ("record-annotations", rule_file("record: a\n    expr: up\n    annotations: {a: b}"), False),
    ("record-name", rule_file("record: 1abc\n    expr: up"), False),
    ("alert-name", rule_file("alert: my alert\n    expr: up"), True),
    ("label-name", rule_file("alert: A\n    expr: up\n    labels: {bad-name: x}"), False),
    ("name-label", rule_file("alert: A\n    expr: up\n    labels: {__name__: x}"), False),
    ("annotation-name", rule_file("alert: A\n    expr: up\n    annotations: {a.b: x}"), False),
    ("unknown-rule-key", rule_file("alert: A\n    expr: up\n    fro: 5m"), False),
    ("unknown-group-key", rule_file("alert: A\n    expr: up", group="name: g\n  evaluation: 1m"), False),
    ("bad-duration", rule_file("alert: A\n    expr: up\n    for: 5 minutes"), False),
    ("no-group-name", rule_file("alert: A\n    expr: up", group="name: ''"), False),
    ("same-group-twice", rule_file("alert: A\n    expr: up") + "- name: g\n  rules: []\n", False),
    ("bad-template", rule_file("alert: A\n    expr: up\n    annotations: {s: '{{ $labels.x '}"), False),
]


def our_verdict(text: str) -> bool:
    try:
        parse_rules(text, "rules.yml")
    except AlertRuleError:
        return False
    return True


@pytest.mark.skipif(shutil.which("promtool") is None, reason="Debian's promtool is not installed")
def test_we_accept_and_refuse_what_promtool_does(tmp_path: Path) -> None:
    for case, text, expected in CASES:
        path = tmp_path / f"{case}.yml"
        path.write_text(text)
        checked = subprocess.run(
            ["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60
        )
        assert (checked.returncode == 0) is expected, f"promtool on {case}: {checked.stdout}{checked.stderr}"
        assert our_verdict(text) is expected, case


def test_refusals_name_the_group_the_rule_and_the_key() -> None:
    with pytest.raises(AlertRuleError) as refused:
        parse_rules(rule_file("alert: A\n    expr: up", "record: r\n    expr: up\n    for: 5m"), "r.yml")
    assert str(refused.value) == "r.yml: group 'g', rule 2, 'r': for: invalid field 'for' in recording rule"
    with pytest.raises(AlertRuleError, match=r"rule 1, 'A': expr: could not parse expression: .*line 1"):
        parse_rules(rule_file("alert: A\n    expr: sum(up"), "r.yml")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("alert: A\n    expr: up\n    labels: {severity: '{{ $value }}'}", "templated label values"),
        ("alert: A\n    expr: up\n    annotations: {s: '{{ if $value }}x{{ end }}'}", "control action 'if'"),
        ("alert: A\n    expr: up\n    annotations: {s: '{{ $externalLabels.dc }}'}", "$externalLabels"),
        ("record: ':a'\n    expr: up", "naming rules"),
    ],
)
def test_what_promtool_accepts_and_artimon_refuses_is_said(text: str, why: str) -> None:
    with pytest.raises(AlertRuleError, match=why.replace("$", r"\$")):
        parse_rules(rule_file(text))


def test_go_templates_render_as_prometheus_renders_them() -> None:
    assert [go_float(v) for v in (97.0, 0.5, 1e6, 123456.0, 1234567.0, 1e-5, -3.25)] == [
        "97",
        "0.5",
        "1e+06",
        "123456",
        "1.234567e+06",
        "1e-05",
        "-3.25",
    ]
    assert [humanize(v) for v in (0, 1234, 1_500_000, 0.00123)] == ["0", "1.234k", "1.5M", "1.23m"]
    assert [humanize_duration(v) for v in (0, 1.5, 3725, 90061, 0.0015)] == [
        "0s",
        "1.5s",
        "1h 2m 5s",
        "1d 1h 1m 1s",
        "1.5ms",
    ]
    context = {"labels": {"instance": "h:9100", "job": "node"}, "value": 0.25}
    cases = {
        "{{ $labels.instance }} of {{ $labels.job }} at {{ $value }}": "h:9100 of node at 0.25",
        "{{ .Labels.instance }} {{ .Value | humanizePercentage }}": "h:9100 25%",
        '{{ printf "%.1f" $value }}|{{ $labels.missing }}|': "0.2||",
        "a {{- /* no */ -}} b {{ $value | humanize }}": "ab 250m",
        "{% raw %} {{ `x` | toUpper }}": "{% raw %} X",
    }
    assert {go: render(translate(go), context) for go in cases} == cases


@pytest.fixture(scope="module")
def vhms() -> Iterator[VhmsService]:
    service = VhmsService(Store("10s:720,60s:60"), http_port=None, snapshot_dir=None, wal=False)
    service.start(register=False)
    try:
        yield service
    finally:
        service.stop()


def ingest(service: VhmsService, keys: list[str], values: list[float], times: list[int]) -> None:
    from bookkeeper.wire import IngestColumns

    with VhmsClient(service.host, service.port, timeout=10) as client:
        client.ingest(IngestColumns.from_keys(keys, np.array(values), np.array(times, dtype=np.int64)))


def test_the_documented_recording_rule_writes_its_series_back_into_vhms(vhms: VhmsService) -> None:
    now = (int(time.time()) - 60) * 1000
    keys = [
        "prometheus_http_requests_total{code=200,handler=/a}",
        "prometheus_http_requests_total{code=200,handler=/b}",
        "prometheus_http_requests_total{code=500,handler=/a}",
    ]
    ingest(vhms, keys, [10.0, 5.0, 2.0], [now - 5000] * 3)
    config = parse_rules(DOC_RECORDING)
    source = LocalClient(vhms.store)
    with VhmsClient(vhms.host, vhms.port, timeout=10) as writer:
        recorder = Recorder(config.recording, source, writer)
        assert recorder.evaluate(now) == {}
    assert recorder.written == 2
    written = PromQLSource(source).query("code:prometheus_http_requests_total:sum", None, now + 1000)
    assert not isinstance(written, float)
    assert sorted(zip(written.labels, written.values[:, -1].tolist(), strict=True), key=str) == [
        ({"code": "200"}, 15.0),
        ({"code": "500"}, 2.0),
    ]


def test_a_duplicate_labelset_fails_the_rule_as_in_prometheus(vhms: VhmsService) -> None:
    now = (int(time.time()) - 60) * 1000
    ingest(vhms, ["dup{a=1,b=1}", "dup{a=1,b=2}"], [1.0, 2.0], [now - 1000] * 2)
    config = parse_rules(rule_file("record: dup:one\n    expr: dup\n    labels: {b: x}"))
    with VhmsClient(vhms.host, vhms.port, timeout=10) as writer:
        errors = Recorder(config.recording, LocalClient(vhms.store), writer).evaluate(now)
    assert "same labelset after applying rule labels" in errors["dup:one"]


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AlertmanagerServer]:
    server = AlertmanagerServer(tmp_path_factory.mktemp("alertmanager"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_the_documented_alert_fires_on_our_data_and_reaches_the_alertmanager(
    vhms: VhmsService, alertmanager: AlertmanagerServer, tmp_path: Path, wait: Callable[..., None]
) -> None:
    now = int(time.time()) * 1000
    start = now - 10 * 60_000
    times = list(range(start, now, 10_000))
    ingest(vhms, ["up{instance=db:9100,job=node}"] * len(times), [0.0] * len(times), times)
    ingest(vhms, ["up{instance=web:9100,job=node}"] * len(times), [1.0] * len(times), times)
    rules = tmp_path / "rules.yml"
    rules.write_text(DOC_TEMPLATING)
    # the command line's --alertmanager, as `artimon alerts -f rules.yml --alertmanager URL` builds it
    from artimon.commands.alerts import _with_alertmanagers
    from query_dsl.alerts import load_rules

    config = _with_alertmanagers(load_rules(rules), [alertmanager.url])
    with AlertEngine(config, PromQLSource(LocalClient(vhms.store))) as engine:
        first = engine.evaluate(now - 6 * 60_000)
        assert [(t.alert.rule, t.current) for t in first.transitions] == [
            ("InstanceDown", AlertState.PENDING)
        ]
        fired = engine.evaluate(now - 30_000)
        assert [(t.alert.rule, t.current) for t in fired.transitions] == [("InstanceDown", AlertState.FIRING)]
        assert not fired.errors  # APIHighRequestLatency: no such series, no alert, no error
        wait(
            lambda: active(alertmanager, "InstanceDown"), timeout=20, what="InstanceDown in the Alertmanager"
        )
    (alert,) = active(alertmanager, "InstanceDown")
    assert alert["labels"] == {
        "alertname": "InstanceDown",
        "instance": "db:9100",
        "job": "node",
        "severity": "page",
    }
    assert alert["annotations"] == {
        "summary": "Instance db:9100 down",
        "description": "db:9100 of job node has been down for more than 5 minutes.",
    }


def active(server: AlertmanagerServer, alertname: str) -> list[dict[str, Any]]:
    """The active alerts of that name in the Alertmanager."""
    alerts: list[dict[str, Any]] = httpx.get(f"{server.url}/api/v2/alerts", timeout=5).json()
    return [a for a in alerts if a["status"]["state"] == "active" and a["labels"]["alertname"] == alertname]


def test_a_firing_alert_reaches_the_alertmanager_and_its_resolution_ends_it(
    alertmanager: AlertmanagerServer, wait: Callable[..., None]
) -> None:
    store = Store()
    now = int(time.time() * 1000)
    before = now - 60_000  # the resolution must lie in the past for the Alertmanager to end the alert
    store.ingest(["cpu{host=a}", "cpu{host=b}"], np.array([97.0, 12.0]), np.array([before - 1000] * 2))
    config = rules_from_dict(
        {
            "notifiers": {"am": {"type": "alertmanager", "url": alertmanager.url, "retries": 1}},
            "rules": [
                {
                    "name": "HotCpu",
                    "expr": 'fetch("cpu", last=5m)',
                    "condition": "> 90",
                    "labels": {"severity": "page"},
                    "annotations": {"summary": "{{ labels.host }} at {{ value }}%"},
                    "notify": ["am"],
                }
            ],
        }
    )
    with AlertEngine(config, EvaluatorSource(LocalClient(store))) as engine:
        engine.evaluate(before)
        wait(lambda: active(alertmanager, "HotCpu"), timeout=20, what="the alert in the Alertmanager")
        (alert,) = active(alertmanager, "HotCpu")
        assert alert["labels"] == {"alertname": "HotCpu", "host": "a", "severity": "page"}
        assert alert["annotations"] == {"summary": "a at 97.0%"}
        assert alert["startsAt"].startswith(time.strftime("%Y-%m-%dT%H:%M", time.gmtime(before / 1000)))

        store.ingest(["cpu{host=a}"], np.array([50.0]), np.array([now - 1000]))
        engine.evaluate(now)
        wait(
            lambda: not active(alertmanager, "HotCpu"),
            timeout=20,
            what="the alert resolved in the Alertmanager",
        )
        stats = engine.dispatcher.stats()["am"]
        assert (stats.delivered, stats.failed_attempts) == (2, 0)


def test_keep_firing_for_holds_a_firing_alert_after_its_series_goes(vhms: VhmsService) -> None:
    now = (int(time.time()) - 3600) * 1000
    ingest(vhms, ["flappy{x=1}"], [1.0], [now])
    config = parse_rules(rule_file("alert: Flappy\n    expr: flappy > 0\n    keep_firing_for: 2m"))
    # the lookback is 5 minutes: the series is gone from 5 minutes after its sample
    with AlertEngine(config, PromQLSource(LocalClient(vhms.store))) as engine:
        assert engine.evaluate(now + 1000).transitions[0].current is AlertState.FIRING
        assert not engine.evaluate(now + 6 * 60_000).transitions  # gone, kept firing
        assert [a.state for a in engine.alerts()] == [AlertState.FIRING]
        assert not engine.evaluate(now + 7 * 60_000).transitions
        resolved = engine.evaluate(now + 8 * 60_000 + 1)
        assert [t.current for t in resolved.transitions] == [AlertState.RESOLVED]


@pytest.mark.slow
def test_check_prints_promtools_verdicts(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yml", tmp_path / "bad.yml"
    good.write_text(DOC_TEMPLATING)
    bad.write_text(rule_file("record: a\n    expr: up\n    for: 5m"))
    checked = subprocess.run(
        [sys.executable, "-m", "artimon", "alerts", "--check", str(good), str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 2
    assert f"Checking {good}\n  SUCCESS: 2 rules found\n" in checked.stdout
    assert f"Checking {bad}\n  FAILED:\n" in checked.stdout
    assert "invalid field 'for' in recording rule" in checked.stdout


CLI_RULES = """
groups:
- name: cli
  rules:
  - record: job:up:sum
    expr: sum by (job) (up)
  - alert: JobDown
    expr: job:up:sum == 0
    labels: {severity: page}
    annotations: {summary: "job {{ $labels.job }} is down ({{ $value }} up)"}
"""


@pytest.mark.slow
def test_artimon_alerts_runs_a_prometheus_rule_file_over_the_shards(
    zk_hosts: str, alertmanager: AlertmanagerServer, tmp_path: Path
) -> None:
    service = VhmsService(Store("10s:720"), http_port=None, snapshot_dir=None, wal=False)
    service.start(zk_hosts, session_timeout=30.0)
    try:
        now = int(time.time()) * 1000
        ingest(
            service,
            ["up{instance=a:1,job=batch}", "up{instance=b:1,job=batch}"],
            [0.0, 0.0],
            [now - 2000] * 2,
        )
        rules = tmp_path / "rules.yml"
        rules.write_text(CLI_RULES)
        command = [sys.executable, "-m", "artimon", "alerts", "-f", str(rules), "--zk", zk_hosts, "--once"]
        command += ["--alertmanager", alertmanager.url, "--state", str(tmp_path / "state.json")]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "1 rule(s), 1 recording rule(s)" in done.stdout
        assert "FIRING   JobDown" in done.stdout
        # the recording rule's series went into VHMS through the shards' client, before the alert read it
        recorded = service.store.fetch("job:up:sum", now - 60_000, now + 60_000)
        assert recorded.series() == [("job:up:sum", {"job": "batch"})]
        (alert,) = active(alertmanager, "JobDown")
        assert alert["labels"] == {"alertname": "JobDown", "job": "batch", "severity": "page"}
        assert alert["annotations"] == {"summary": "job batch is down (0 up)"}
    finally:
        service.stop()


def test_the_rules_can_query_through_the_prometheus_api(vhms: VhmsService) -> None:
    now = (int(time.time()) - 120) * 1000
    ingest(vhms, ["api_up{instance=x:1}", "api_up{instance=y:1}"], [0.0, 1.0], [now - 1000] * 2)
    api = BackgroundServer(create_app(LocalClient(vhms.store)), name="prom-rules-api")
    api.start()
    http = PromQLHttpSource(f"{api.url}/prometheus")
    try:
        down = http.query("api_up == 0", None, now)
        assert not isinstance(down, float)
        assert (down.names, down.labels, down.values.tolist()) == (["api_up"], [{"instance": "x:1"}], [[0.0]])
        assert http.query("scalar(sum(api_up))", None, now) == 1.0
        with pytest.raises(QueryError, match="400 bad_data"):
            http.query("sum(", None, now)
        config = parse_rules(rule_file("alert: ApiDown\n    expr: api_up == 0"))
        with AlertEngine(config, http) as engine:
            (fired,) = engine.evaluate(now).transitions
        assert (fired.alert.labels, fired.current) == (
            {"alertname": "ApiDown", "instance": "x:1"},
            AlertState.FIRING,
        )
    finally:
        http.close()
        api.stop()
    with pytest.raises(QueryError, match="does not answer"):
        PromQLHttpSource(f"{api.url}/prometheus", timeout=2).query("up")
