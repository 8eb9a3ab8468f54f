"""End to end: ``artimon alerts --once`` as a process, through the real query API (uvicorn),
notifying through a command; its state carried from one run to the next; and the example
rules file over demo-shaped data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from artimon.servers import free_port
from bookkeeper.ground import BackgroundServer, DirectoryLock
from query_dsl.alerts import AlertEngine, EvaluatorSource, load_rules
from query_dsl.http import create_app
from vhms import LocalClient
from vhms.server import Store

MINUTE = 60_000
NOW = int(time.time() * 1000) // MINUTE * MINUTE
EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "alerts.yaml"


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    store = Store()
    keys = ["temp{rack=r1}", "temp{rack=r2}", "temp{rack=r3}"]
    now = int(time.time() * 1000) // MINUTE * MINUTE  # when the module runs, not when it was collected
    for minute in range(6):
        store.ingest(keys, np.array([24.0, 31.5, 33.0]), np.full(3, now - (5 - minute) * MINUTE))
    server = BackgroundServer(create_app(LocalClient(store)), "127.0.0.1", 0, name="alerts-cli-api")
    server.start()
    yield server.url
    server.stop()


def alerts(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "artimon", "alerts", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k not in ("ARTIMON_API", "ARTIMON_API_TOKEN")},
    )


def write_rules(tmp_path: Path, log: Path) -> Path:
    appender = "import sys; open(sys.argv[1], 'a').write(sys.stdin.read() + '\\n')"
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        f"""
notifiers:
  log:
    type: command
    argv: [{json.dumps(sys.executable)}, -c, {json.dumps(appender)}, {json.dumps(str(log))}]
rules:
  - name: HotRack
    expr: fetch("temp", last=10m)
    condition: "> 30"
    labels: {{severity: page}}
    annotations: {{summary: "rack {{{{ labels.rack }}}} at {{{{ value }}}} C"}}
    notify: [log]
"""
    )
    return rules


def test_once_fires_notifies_and_keeps_state_for_the_next_run(api: str, tmp_path: Path) -> None:
    log = tmp_path / "notifications.jsonl"
    rules = write_rules(tmp_path, log)
    state = tmp_path / "state.json"
    first = alerts("-f", str(rules), "--api", api, "--state", str(state), "--once")
    assert first.returncode == 0, first.stderr
    firing = [line for line in first.stdout.splitlines() if " FIRING " in line]
    assert [line.split()[3] for line in firing] == ["temp{rack=r2}", "temp{rack=r3}"], first.stdout
    assert firing[0].endswith("value=31.5 (was inactive)")
    (sent,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert sent["status"] == "firing" and len(sent["alerts"]) == 2
    assert sent["alerts"][1]["annotations"]["summary"] == "rack r3 at 33.0 C"
    assert sent["alerts"][1]["labels"] == {"rack": "r3", "severity": "page", "alertname": "HotRack"}

    second = alerts("-f", str(rules), "--api", api, "--state", str(state), "--once")
    assert second.returncode == 0, second.stderr
    assert " FIRING " not in second.stdout  # still firing since the first run: no change, no mail
    assert len(log.read_text().splitlines()) == 1
    saved = json.loads(state.read_text())
    assert [a["series"] for a in saved["alerts"]] == ["temp{rack=r2}", "temp{rack=r3}"]


def test_runs_every_interval_until_sigterm(api: str, tmp_path: Path, wait: Callable[..., None]) -> None:
    rules = write_rules(tmp_path, tmp_path / "log.jsonl")
    rules.write_text("interval: 1s\n" + rules.read_text())
    state = str(tmp_path / "s")
    command = [sys.executable, "-m", "artimon", "alerts", "-f", str(rules), "--api", api, "--state", state]
    command += ["--metrics-port", "0"]
    lines: list[str] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        reader = threading.Thread(target=lambda: lines.extend(process.stdout or []), daemon=True)
        reader.start()
        try:
            wait(lambda: len(lines) >= 4 or process.poll() is not None, timeout=60, what="two alerts firing")
            assert lines[0].startswith("metrics on http://127.0.0.1:"), lines
            assert lines[1].startswith("alerts: 1 rule(s) from ") and "every 1 s" in lines[1], lines
            assert all(" FIRING " in line for line in lines[2:4]), lines
            metrics_url = lines[0].split()[2]
            assert httpx.get(metrics_url.replace("/metrics", "/health"), timeout=10).json()["status"] == "ok"
            exposed = {
                (sample.name, tuple(sorted(sample.labels.items()))): sample.value
                for family in text_string_to_metric_families(httpx.get(metrics_url, timeout=10).text)
                for sample in family.samples
            }
            assert exposed[("artimon_alerts_active", (("rule", "HotRack"),))] == 2
            assert exposed[("artimon_alert_rule_evaluations_total", (("rule", "HotRack"),))] >= 1
            assert exposed[("process_resident_memory_bytes", ())] > 0
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
            reader.join(30)
        errors = process.stderr.read() if process.stderr else ""
    assert process.returncode == 0, errors
    assert sum(" FIRING " in line for line in lines) == 2  # later evaluations changed nothing


def test_once_with_the_api_down_reports_the_error_and_keeps_state(api: str, tmp_path: Path) -> None:
    rules = write_rules(tmp_path, tmp_path / "log.jsonl")
    state = tmp_path / "state.json"
    assert alerts("-f", str(rules), "--api", api, "--state", str(state), "--once").returncode == 0
    down = alerts(
        "-f", str(rules), "--api", f"http://127.0.0.1:{free_port()}", "--state", str(state), "--once"
    )
    assert down.returncode == 1
    assert (
        " ERROR    HotRack: QueryError: the query API at" in down.stdout and "does not answer" in down.stdout
    )
    assert len(json.loads(state.read_text())["alerts"]) == 2


def test_a_state_directory_held_by_another_process_is_refused_with_its_pid(api: str, tmp_path: Path) -> None:
    rules = write_rules(tmp_path, tmp_path / "log.jsonl")
    data = tmp_path / "artimon-data"
    with DirectoryLock(data, "artimon up"):  # as a running `artimon up` holds its own
        refused = alerts("-f", str(rules), "--api", api, "--state", str(data / "alerts-state.json"), "--once")
    assert refused.returncode == 1
    assert f"is in use by pid {os.getpid()} (artimon up)" in refused.stderr
    assert not (data / "alerts-state.json").exists()
    assert (
        alerts(
            "-f", str(rules), "--api", api, "--state", str(data / "alerts-state.json"), "--once"
        ).returncode
        == 0
    )


def test_a_failing_notifier_makes_once_fail(api: str, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        f"""
notifiers:
  broken:
    type: command
    argv: [{json.dumps(sys.executable)}, -c, "raise SystemExit(4)"]
    retries: 1
    backoff: 10ms
rules:
  - {{name: HotRack, expr: 'fetch("temp", last=10m)', condition: "> 30", notify: [broken]}}
"""
    )
    result = alerts("-f", str(rules), "--api", api, "--state", str(tmp_path / "s.json"), "--once")
    assert result.returncode == 1
    assert "notifier broken: 0 delivered, 1 given up, 0 dropped; last error:" in result.stderr
    assert "exited with status 4" in result.stderr


def test_check_and_bad_files(tmp_path: Path) -> None:
    checked = alerts("-f", str(EXAMPLE), "--check")
    assert checked.returncode == 0 and checked.stdout.strip().endswith("5 rule(s), 1 notifier(s): OK")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - name: R\n    expr: fetch(\n")
    refused = alerts("-f", str(bad), "--check")
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"artimon alerts: {bad}: rule 'R': expr: the query ends too early")
    nowhere = alerts("-f", str(EXAMPLE), "--once")
    assert nowhere.returncode == 2 and "give --api" in nowhere.stderr


def test_the_example_rules_over_demo_shaped_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example's queries run over series named and labelled as ``artimon up --demo``
    makes them; the hot rack (r4, about 28 °C) fires and reaches the log."""
    store = Store()
    web = {"context": "demo.web", "dc": "par", "rack": "r1", "host": "h1"}
    samples: dict[str, float] = {}
    for rack, celsius in {"r1": 25.0, "r2": 26.0, "r3": 27.0, "r4": 28.1}.items():
        samples[f"rack.temperature.celsius{{context=demo.racks,dc=par,host=h1,rack={rack}}}"] = celsius
    for server in ("db1", "db2"):
        for volume in ("/", "/data"):
            labels = f"context=demo.storage,dc=par,host=h1,rack=r2,server={server},volume={volume}"
            samples[f"disk.size.bytes{{{labels}}}"] = 500.0
            samples[f"disk.used.bytes{{{labels}}}"] = 200.0
    labels = ",".join(f"{k}={v}" for k, v in sorted(web.items()))
    samples[f"http.latency.ms{{{labels}}}"] = 30.0
    samples[f"app.up{{{labels}}}"] = 1.0
    for minute in range(16):
        at = NOW - (15 - minute) * MINUTE
        store.ingest(list(samples), np.array(list(samples.values())), np.full(len(samples), at))
        store.ingest(
            [f"http.requests{{{labels},method=GET,status=500}}"], np.array([minute * 180.0]), np.array([at])
        )
    monkeypatch.chdir(tmp_path)  # the example's command appends to ./artimon-alerts.log
    with AlertEngine(load_rules(EXAMPLE), EvaluatorSource(LocalClient(store))) as engine:
        engine.evaluate(NOW + 1000)
        evaluation = engine.evaluate(NOW + MINUTE + 1000)
        assert not evaluation.errors
        firing = [(t.alert.rule, t.alert.labels["rack"], t.current.value) for t in evaluation.transitions]
        assert firing == [("HotRack", "r4", "firing")]
        assert engine.dispatcher.flush(60)
    (line,) = (tmp_path / "artimon-alerts.log").read_text().splitlines()
    assert json.loads(line)["alerts"][0]["annotations"]["summary"] == "rack r4 is at 28.1 °C"
    assert {h.rule for h in engine.health() if h.evaluations == 2 and h.ok} == {
        "HotRack",
        "SlowRequests",
        "ServerErrors",
        "DiskAlmostFull",
        "AppDown",
    }
