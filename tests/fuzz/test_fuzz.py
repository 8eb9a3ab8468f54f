"""Every decoder and parser fuzzed briefly (atheris, coverage-guided; longer runs:
``benchmarks/fuzz_bench.py``): each target ends its budget with no crash, no input past the
memory limit and none past the time limit. Its seeds are valid inputs, each run here too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fuzz_targets import TARGETS

RUNNER = Path(__file__).with_name("fuzz_runner.py")


@pytest.mark.parametrize("name", list(TARGETS))
def test_seeds_pass_through_their_target(name: str) -> None:
    target = TARGETS[name]
    assert target.seeds
    for seed in target.seeds:
        target.one_input(seed)


def test_every_target_survives_a_brief_fuzzing(tmp_path: Path) -> None:
    report = tmp_path / "fuzz.json"
    command = [sys.executable, str(RUNNER), "--seconds", "1", "--runs", "1000"]
    command += ["--workdir", str(tmp_path), "--json", str(report), "--seed", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert report.exists(), done.stdout + done.stderr
    rows = json.loads(report.read_text())
    assert [row["target"] for row in rows] == list(TARGETS)
    crashed = [f"{row['target']}: {row['error']} ({row['artifacts']})" for row in rows if row["crashes"]]
    assert not crashed, "\n".join(crashed)
    assert all(row["inputs"] >= 100 for row in rows), rows
    assert done.returncode == 0, done.stdout + done.stderr
