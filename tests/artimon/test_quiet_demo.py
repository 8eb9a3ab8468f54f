"""A healthy demo is quiet (issue 31): ``artimon up --demo`` and ``artimon up --demo --kafka``,
run side by side for three minutes (36 rounds of 5 s, each on a data directory and ports of
its own), print no WARNING, ERROR, warning or traceback from start to stop, nor write one in
``logs/``; and every round stores every sample: each round line after the first counts a
sample per numeric series in VHMS (with Kafka, whose store side takes a round's samples
across the line's instant, the rounds' sum does), and VHMS holds a value of every numeric
series in every 5 s bucket of the last two minutes.

Side by side, the two cost one demo's wall time (about 4 minutes with the stops) instead of
two, on a machine where the suite's other tests wait for the CPU anyway."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support import Lines

ARTIMON = [sys.executable, "-m", "artimon"]
ROUNDS = 36  # three minutes of 5 s rounds
STRING_SERIES = 1  # the demo's app.version: a text in VHMS, no sample per round
# lines that say something is wrong, in any process's output or log
ALARM = re.compile(r"WARN|ERROR|Traceback|Warning|Exception")
# the JVM's notice for the incubator module Spark's launcher always adds (--add-modules
# jdk.incubator.vector), printed before any logging is set up; Java has no switch for it
JVM_NOTICE = "WARNING: Using incubator modules: jdk.incubator.vector"
ROUND = re.compile(
    r"^round [\d:]+: \d+ endpoints polled, 0 failed, (\d+) samples stored, (\d+) series in VHMS"
)
pytestmark = pytest.mark.slow


def start(data: Path, *options: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ARTIMON_ZK", "ARTIMON_KAFKA", "ARTIMON_CONTEXT")}
    command = [*ARTIMON, "up", "--demo", *options, "--data-dir", str(data), "--rounds", str(ROUNDS)]
    command += ["--zk-port", "0", "--api-port", "0", "--thrift-port", "0"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def rounds_seen(output: Lines) -> int:
    return sum(line.startswith("round ") for line in output.seen)


def every_bucket_filled(api: str) -> None:
    """Every numeric series has a value in each 5 s bucket of the last 100 s (rounds 6 to 26)
    but the newest (the round still being stored)."""
    done = subprocess.run(
        [*ARTIMON, "query", "--url", api, "--format", "json", 'fetch("~.*", last=100s)'],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    numeric = [r for r in json.loads(done.stdout) if any(v is not None for v in r["values"])]
    assert numeric
    gaps = {
        f"{r['name']}{r['labels']}": [
            t for t, v in zip(r["timestamps"], r["values"], strict=True) if v is None
        ]
        for r in numeric
        if None in r["values"][:-1]
    }
    assert not gaps, f"{len(gaps)} of {len(numeric)} series miss rounds: {list(gaps.items())[:5]}"


def check_rounds(lines: list[str], exact: bool) -> None:
    rounds = [ROUND.match(line) for line in lines if line.startswith("round ")]
    assert len(rounds) == ROUNDS and all(rounds), [line for line in lines if line.startswith("round ")]
    counts = [(int(m.group(1)), int(m.group(2))) for m in rounds if m is not None][
        1:
    ]  # the first: from start
    series = {s for _, s in counts}
    assert len(series) == 1, f"series came or went: {sorted(series)}"
    expected = series.pop() - STRING_SERIES
    stored = [n for n, _ in counts]
    if exact:
        assert set(stored) == {expected}, stored
    else:  # a round's samples may reach VHMS through Kafka after its line: the sum holds, bar the last
        assert abs(sum(stored) - expected * len(stored)) < expected, (expected, stored)


def test_the_demo_is_quiet_and_stores_every_sample(tmp_path: Path) -> None:
    ups = {"plain": start(tmp_path / "plain"), "kafka": start(tmp_path / "kafka", "--kafka")}
    outputs = {name: Lines(up.stdout) for name, up in ups.items()}
    try:
        apis = {}
        for name, output in outputs.items():
            ready = output.until(lambda line: line.startswith("[ready] query api"), 240, f"{name}'s API")
            found = re.search(r"(http://127\.0\.0\.1:\d+)/api/v1/query", ready)
            assert found is not None, ready
            apis[name] = found.group(1)
        for name, output in outputs.items():
            output.until(lambda line, o=output: rounds_seen(o) >= 26, 400, f"{name}'s 26th round")
        with ThreadPoolExecutor(2) as pool:  # both at once: each stack stops on its own 50 s later
            list(pool.map(every_bucket_filled, apis.values()))
        codes = {name: up.wait(timeout=300) for name, up in ups.items()}
    finally:
        for up in ups.values():
            if up.poll() is None:
                up.kill()
                up.wait()
    rests = {name: output.rest() for name, output in outputs.items()}
    for up in ups.values():
        up.stdout.close()  # type: ignore[union-attr]
    for name, lines in rests.items():
        assert codes[name] == 0 and lines[-1] == "stopped.", (name, lines[-20:])
        check_rounds(lines, exact=name == "plain")
        logs = sorted((tmp_path / name / "logs").iterdir())
        assert {log.name for log in logs} >= {"spark.log", "up.log"}
        said = [f"{name}: {line}" for line in lines if ALARM.search(line)]
        for log in logs:
            said += [f"{log}: {line}" for line in log.read_text().splitlines() if ALARM.search(line)]
        assert [line for line in said if not line.endswith(JVM_NOTICE)] == [], said
