"""The README's quick start, followed literally as a newcomer would: ``artimon up --demo`` on
its default ports, the README's bookkeeper example as a second process, the query the
ready line prints and every worked example of docs/dsl.md through ``artimon query``. Every
answer has values and no warning, the example's variable is in VHMS within two rounds, and
``up`` prints no ERROR and no traceback from start to stop."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import Lines

ROOT = Path(__file__).resolve().parents[2]
ARTIMON = [sys.executable, "-m", "artimon"]
pytestmark = pytest.mark.slow


def readme_text() -> str:
    return (ROOT / "README.md").read_text()


def readme_python() -> str:
    (block,) = re.findall(r"```python\n(.*?)```", readme_text(), re.S)
    return block


def dsl_examples() -> list[str]:
    text = (ROOT / "docs" / "dsl.md").read_text()
    section = text[text.index("## Ten worked examples") : text.index("## Limits")]
    return re.findall(r"^\s+`(.+)`$", section, re.M)


def query(text: str) -> tuple[list[dict], str]:
    done = subprocess.run(
        [*ARTIMON, "query", "--url", "http://127.0.0.1:8080", "--format", "json", text],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (text, done.stderr)
    return json.loads(done.stdout), done.stderr


def has_values(records: list[dict]) -> bool:
    return any(value is not None for record in records for value in record["values"])


def test_the_readme_quick_start_as_a_user(default_ports: None, tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ARTIMON_ZK", "ARTIMON_CONTEXT", "ARTIMON_ZK_AUTH", "ARTIMON_ZK_AUTH_FILE")
    }
    up = subprocess.Popen(
        [*ARTIMON, "up", "--demo"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    app = None
    try:
        output = Lines(up.stdout)
        ready_query = output.until(
            lambda line: line.startswith("[ready] query api"), 120, "query API ready line"
        )
        output.until(lambda line: line.startswith("[ready] agent"), 120, "agent ready line")
        script = tmp_path / "example.py"
        script.write_text(readme_python())
        export = re.search(r"^export (ARTIMON_ZK_AUTH_FILE)=\$PWD/(\S+)$", readme_text(), re.M)
        assert export is not None, "the README says where the application finds the credentials"
        assert (tmp_path / export.group(2)).stat().st_mode & 0o777 == 0o600
        app_env = {**env, export.group(1): str(tmp_path / export.group(2))}
        app = subprocess.Popen([sys.executable, str(script)], env=app_env, stderr=subprocess.PIPE, text=True)
        output.until(lambda line: line.startswith("round "), 60, "a first round")
        output.until(lambda line: line.startswith("round "), 60, "a second round")
        third = output.until(
            lambda line: line.startswith("round "), 60, "a third round"
        )  # two rounds after the app
        said = re.search(r"(\d+) samples stored, (\d+) series in VHMS", " ".join(readme_text().split()))
        ran = re.search(r"(\d+) samples stored, (\d+) series in VHMS", third)
        assert said is not None and ran is not None, third
        for printed, run in zip(
            said.groups(), ran.groups(), strict=True
        ):  # the README's round line is today's
            assert abs(int(run) - int(printed)) <= int(printed) // 20, (said.group(0), third)
        usage, _ = query('fetch("pool.usage", last=5m)')
        assert [r["labels"]["pool"] for r in usage] == ["db"] and 0.42 in usage[0]["values"]
        printed = re.search(r"'(.+)'\)$", ready_query)
        assert printed is not None, ready_query
        for text in [printed.group(1), *dsl_examples()]:
            records, warnings = query(text)
            assert has_values(records), f"{text} answers no value: {records} {warnings}"
            assert "warning" not in warnings, (text, warnings)
        assert len(dsl_examples()) == 10
        properties = tmp_path / "artimon-data" / "agent.properties"
        edited = properties.read_text().replace(
            "up.sources.files.interval = ${ARTIMON_INTERVAL}", "up.sources.files.interval = 2"
        )
        assert edited != properties.read_text()
        properties.write_text(edited)  # the agent applies the difference by itself
        output.until(
            lambda line: "agent up reloaded" in line, 60, "the agent reloading its edited properties"
        )
    finally:  # up stopped whatever the app did: the default ports are the next tests' too
        app_errors = ""
        if app is not None:
            app.send_signal(signal.SIGINT)
            try:
                app_errors = app.communicate(timeout=30)[1]
            except subprocess.TimeoutExpired:
                app.kill()
                app_errors = app.communicate()[1] + "\n(still running 30 s after Ctrl-C)"
        up.send_signal(signal.SIGINT)
        code = up.wait(timeout=240)
        lines = output.rest()
        assert up.stdout is not None
        up.stdout.close()
    assert app is not None and app.returncode == 0, app_errors
    assert re.match(  # it says where it serves, and that Ctrl-C stops it
        r"bookkeeper default: serving on 127\.0\.0\.1:\d+, registered in ZooKeeper 127\.0\.0\.1:2181 "
        r"as /artimon/contexts/default/[\d.]+:\d+:[0-9a-f-]+; Ctrl-C stops\n",
        app_errors,
    ), app_errors
    assert code == 0 and lines[-1] == "stopped.", lines[-20:]
    assert not [line for line in lines if "ERROR" in line or "Traceback" in line], lines
