"""The alert engine's state machine at explicit times over a real store, its state file
across restarts, and what it does when the query API goes away."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bookkeeper.ground import BackgroundServer
from query_dsl import Client
from query_dsl.alerts import (
    Alert,
    AlertConfig,
    AlertEngine,
    AlertRuleError,
    AlertState,
    Condition,
    Evaluation,
    EvaluatorSource,
    Notification,
    Receiver,
    Rule,
    rules_from_dict,
)
from query_dsl.http import create_app
from vhms import LocalClient
from vhms.server import Store

MINUTE = 60_000
BASE = 1_700_000_000_000 // MINUTE * MINUTE


def at(minute: int, second: int = 30) -> int:
    return BASE + minute * MINUTE + second * 1000


class Recorder:
    """A notifier plug-in that keeps what it is sent."""

    def __init__(self) -> None:
        self.received: list[Notification] = []
        self.lock = threading.Lock()

    def send(self, notification: Notification) -> None:
        with self.lock:
            self.received.append(notification)

    def close(self) -> None:
        """Nothing to close."""


def put(store: Store, minute: int, **values: float) -> None:
    """One sample per host of ``cpu`` at the start of ``minute``."""
    keys = [f"cpu{{host={host}}}" for host in values]
    store.ingest(keys, np.array(list(values.values())), np.full(len(keys), at(minute, 0)))


def config(recorder: Recorder, **rule: object) -> AlertConfig:
    fields: dict[str, object] = {
        "name": "HighCpu",
        "expr": 'fetch("cpu", last=2m)',
        "condition": "> 90",
        "for": "3m",
        "labels": {"severity": "page"},
        "annotations": {"summary": "{{ labels.host }} at {{ value }} ({{ state }})"},
        **rule,
    }
    parsed = rules_from_dict({"repeat_interval": "10m", "rules": [fields]})
    rules = [replace(r, notify=("rec",)) for r in parsed.rules]
    return AlertConfig(
        rules, {"rec": Receiver("rec", recorder)}, parsed.interval_ms, parsed.repeat_interval_ms
    )


def moves(evaluation: Evaluation) -> list[tuple[str, str, str]]:
    return [(t.alert.series, t.previous.value, t.current.value) for t in evaluation.transitions]


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
def engine_factory(store: Store) -> Iterator[Callable[..., AlertEngine]]:
    engines: list[AlertEngine] = []

    def make(cfg: AlertConfig, **options: object) -> AlertEngine:
        engine = AlertEngine(cfg, EvaluatorSource(LocalClient(store)), **options)  # type: ignore[arg-type]
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()


def test_pending_then_firing_after_for_then_repeat_then_resolved(
    store: Store, engine_factory: Callable[..., AlertEngine], wait: Callable[..., None]
) -> None:
    recorder = Recorder()
    engine = engine_factory(config(recorder))
    put(store, 0, a=95, b=20)
    first = engine.evaluate(at(0))
    assert moves(first) == [("cpu{host=a}", "inactive", "pending")] and not first.notifications
    (alert,) = engine.alerts()
    assert alert.labels == {"host": "a", "severity": "page", "alertname": "HighCpu"} and alert.value == 95
    for minute in (1, 2):
        put(store, minute, a=96, b=20)
        assert not engine.evaluate(at(minute)).transitions
    put(store, 3, a=97, b=20)
    fired = engine.evaluate(at(3))  # three minutes after it went pending: `for` has passed
    assert moves(fired) == [("cpu{host=a}", "pending", "firing")]
    (notification,) = fired.notifications
    assert notification.status == "firing" and notification.subject == "[FIRING:1] HighCpu"
    assert notification.alerts[0].annotations == {"summary": "a at 97.0 (firing)"}
    for minute in range(4, 13):
        put(store, minute, a=97, b=20)
        assert not engine.evaluate(at(minute)).notifications
    put(store, 13, a=98, b=20)
    repeated = engine.evaluate(at(13))  # repeat_interval (10m) after the first notification
    assert not repeated.transitions and [n.status for n in repeated.notifications] == ["firing"]
    put(store, 14, a=50, b=20)
    resolved = engine.evaluate(at(14))
    assert moves(resolved) == [("cpu{host=a}", "firing", "resolved")]
    (notification,) = resolved.notifications
    assert notification.subject == "[RESOLVED] HighCpu" and notification.alerts[0].resolved_ms == at(14)
    assert engine.alerts() == []
    wait(lambda: len(recorder.received) == 3, what="three notifications delivered")
    assert [n.status for n in recorder.received] == ["firing", "firing", "resolved"]
    assert engine.dispatcher.stats()["rec"].delivered == 3


def test_flapping_pending_goes_back_silently_and_refiring_starts_over(
    store: Store, engine_factory: Callable[..., AlertEngine]
) -> None:
    engine = engine_factory(config(Recorder(), **{"for": "2m"}))
    script = [95, 50, 95, 95, 95, 50, 95]
    seen = []
    for minute, value in enumerate(script):
        put(store, minute, a=value)
        evaluation = engine.evaluate(at(minute))
        seen.append((moves(evaluation), [n.status for n in evaluation.notifications]))
    a = "cpu{host=a}"
    assert seen == [
        ([(a, "inactive", "pending")], []),
        ([(a, "pending", "inactive")], []),  # silently: no notification
        ([(a, "inactive", "pending")], []),  # a new active_since
        ([], []),
        ([(a, "pending", "firing")], ["firing"]),
        ([(a, "firing", "resolved")], ["resolved"]),
        ([(a, "inactive", "pending")], []),  # back, but `for` starts over
    ]


def test_for_zero_fires_at_once_and_a_vanished_series_resolves(
    store: Store, engine_factory: Callable[..., AlertEngine]
) -> None:
    engine = engine_factory(config(Recorder(), **{"for": "0s", "condition": None}))
    put(store, 0, a=1)
    assert moves(engine.evaluate(at(0))) == [("cpu{host=a}", "inactive", "firing")]
    assert moves(engine.evaluate(at(1))) == []  # the 2-minute window still holds minute 0
    gone = engine.evaluate(at(2))
    assert moves(gone) == [("cpu{host=a}", "firing", "resolved")]
    assert [n.status for n in gone.notifications] == ["resolved"]


def test_a_number_result_is_one_alert_without_labels(engine_factory: Callable[..., AlertEngine]) -> None:
    engine = engine_factory([Rule("Always", "6 * 7", Condition(">", 40))])
    (transition,) = engine.evaluate(at(0)).transitions
    assert transition.alert.series == "" and transition.alert.value == 42.0
    assert transition.current is AlertState.FIRING and transition.alert.labels == {"alertname": "Always"}


def test_too_many_series_is_an_error_that_keeps_the_alerts(
    store: Store, engine_factory: Callable[..., AlertEngine]
) -> None:
    engine = engine_factory(config(Recorder(), **{"for": "0s"}), max_alerts_per_rule=1)
    put(store, 0, a=95)
    engine.evaluate(at(0))
    put(store, 1, a=95, b=95)
    evaluation = engine.evaluate(at(1))
    assert "more than max_alerts_per_rule=1" in evaluation.errors["HighCpu"]
    assert [a.series for a in engine.alerts()] == ["cpu{host=a}"]
    (health,) = engine.health()
    assert not health.ok and health.errors == 1 and health.evaluations == 2


def test_state_survives_a_restart(
    store: Store, engine_factory: Callable[..., AlertEngine], tmp_path: Path
) -> None:
    state = tmp_path / "state" / "alerts.json"
    put(store, 0, a=95, b=95)
    first = engine_factory(config(Recorder()), state_file=state)
    first.evaluate(at(0))  # both pending
    put(store, 1, a=95, b=95)
    put(store, 2, a=95, b=95)
    put(store, 3, a=95, b=50)
    assert len(first.evaluate(at(3)).notifications) == 1  # a fires; b is gone
    first.close()
    saved = json.loads(state.read_text())
    assert saved["version"] == 1 and [a["state"] for a in saved["alerts"]] == ["firing"]

    second = engine_factory(config(Recorder()), state_file=state)
    (alert,) = second.alerts()
    assert alert.state is AlertState.FIRING and alert.fired_ms == at(3) and alert.last_notified_ms == at(3)
    put(store, 4, a=95, b=95)
    evaluation = second.evaluate(at(4))  # a: no new firing; b: pending again from scratch
    assert moves(evaluation) == [("cpu{host=b}", "inactive", "pending")] and not evaluation.notifications
    for minute in range(5, 14):
        put(store, minute, a=95)
    repeated = second.evaluate(at(13))  # the repeat interval counts from before the restart
    assert [[x.series for x in n.alerts] for n in repeated.notifications] == [["cpu{host=a}"]]


def test_pending_for_counts_across_a_restart(
    store: Store, engine_factory: Callable[..., AlertEngine], tmp_path: Path
) -> None:
    state = tmp_path / "alerts.json"
    put(store, 0, a=95)
    engine_factory(config(Recorder()), state_file=state).evaluate(at(0))
    for minute in (1, 2, 3):
        put(store, minute, a=95)
    restarted = engine_factory(config(Recorder()), state_file=state)
    assert moves(restarted.evaluate(at(3))) == [("cpu{host=a}", "pending", "firing")]


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b'{"version": 99, "alerts": []}',
        b'{"version": 1, "alerts": [{"state": "x"}]}',
        b"\xff\x00",
    ],
)
def test_a_corrupt_state_file_is_set_aside(
    content: bytes, store: Store, engine_factory: Callable[..., AlertEngine], tmp_path: Path
) -> None:
    state = tmp_path / "alerts.json"
    state.write_bytes(content)
    engine = engine_factory(config(Recorder()), state_file=state)
    assert engine.alerts() == []
    (aside,) = tmp_path.glob("alerts.json.corrupt-*")
    assert aside.read_bytes() == content
    put(store, 0, a=95)
    assert moves(engine.evaluate(at(0))) == [("cpu{host=a}", "inactive", "pending")]
    assert json.loads(state.read_text())["alerts"][0]["series"] == "cpu{host=a}"


def test_alerts_of_a_removed_rule_are_dropped_at_start(
    store: Store, engine_factory: Callable[..., AlertEngine], tmp_path: Path
) -> None:
    state = tmp_path / "alerts.json"
    put(store, 0, a=95)
    engine_factory(config(Recorder()), state_file=state).evaluate(at(0))
    renamed = engine_factory(config(Recorder(), name="CpuHigh"), state_file=state)
    assert renamed.alerts() == []


def test_a_rule_naming_an_unknown_receiver_is_refused(engine_factory: Callable[..., AlertEngine]) -> None:
    with pytest.raises(AlertRuleError, match="no notifier named 'pager'") as caught:
        engine_factory([Rule("R", "1", notify=("pager",))])
    assert caught.value.rule == "rule 'R'" and caught.value.field == "notify"


def test_query_errors_keep_the_alerts_and_show_in_health(store: Store) -> None:
    put(store, 0, a=95)
    server = BackgroundServer(create_app(LocalClient(store)), "127.0.0.1", 0, name="alerts-api")
    server.start()
    client = Client(server.url, timeout=5)
    recorder = Recorder()
    engine = AlertEngine(config(recorder, **{"for": "0s"}), client)
    try:
        assert moves(engine.evaluate(at(0))) == [("cpu{host=a}", "inactive", "firing")]
        server.stop()
        down = engine.evaluate(at(5))  # the data is gone too: only the error may explain it
        assert not down.transitions and not down.notifications
        assert "does not answer" in down.errors["HighCpu"]
        assert [a.state for a in engine.alerts()] == [AlertState.FIRING]
        (health,) = engine.health()
        assert health.errors == 1 and health.last_error == down.errors["HighCpu"]
    finally:
        engine.close()
        client.close()
        server.stop()


def test_alert_json_carries_infinite_values(store: Store, engine_factory: Callable[..., AlertEngine]) -> None:
    put(store, 0, a=1)
    engine = engine_factory([Rule("DivByZero", 'fetch("cpu", last=2m) / 0', for_ms=0)])
    (transition,) = engine.evaluate(at(0)).transitions
    assert json.loads(json.dumps(transition.alert.to_dict(), allow_nan=False))["value"] == "+Inf"
    assert isinstance(transition.alert, Alert)


def test_run_evaluates_every_interval_until_stopped(
    store: Store, engine_factory: Callable[..., AlertEngine], wait: Callable[..., None]
) -> None:
    put(store, 0, a=95)
    cfg = replace(config(Recorder(), **{"for": "0s"}), interval_ms=20)
    engine = engine_factory(cfg)
    reports: list[Evaluation] = []
    stop = threading.Event()
    runner = threading.Thread(target=engine.run, args=(stop, reports.append))
    runner.start()
    try:
        wait(lambda: len(reports) >= 3, what="three evaluations")
    finally:
        stop.set()
        runner.join(30)
    assert not runner.is_alive()
    assert all(not r.errors for r in reports) and reports[0].at_ms <= reports[-1].at_ms


def test_the_engine_metrics_count_evaluations_alerts_and_deliveries(
    store: Store, engine_factory: Callable[..., AlertEngine]
) -> None:
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from query_dsl.alerts import AlertEngineMetrics

    def samples(collector: AlertEngineMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        text = generate_latest(collector).decode()  # type: ignore[arg-type]
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    assert samples(AlertEngineMetrics(None)) == {("artimon_alert_rules", ()): 0.0}
    put(store, 0, a=95, b=10)
    recorder = Recorder()
    engine = engine_factory(config(recorder, **{"for": "0s"}))
    engine.evaluate(at(0))
    engine.evaluate(at(1))
    assert engine.dispatcher.flush(10)
    got = samples(AlertEngineMetrics(engine))
    rule, notifier = (("rule", "HighCpu"),), (("notifier", "rec"),)
    assert got[("artimon_alert_rules", ())] == 1
    assert got[("artimon_alert_rule_evaluations_total", rule)] == 2
    assert got[("artimon_alert_rule_evaluation_failures_total", rule)] == 0
    assert got[("artimon_alerts_active", rule)] == 1  # host a fires, b does not
    assert got[("artimon_alert_notifications_delivered_total", notifier)] == len(recorder.received) >= 1
    assert got[("artimon_alert_notifications_dropped_total", notifier)] == 0
