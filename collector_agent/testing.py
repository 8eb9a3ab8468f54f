"""Harness for tests, benchmarks and demos: an agent in a process of its own, as an
operator runs it (``artimon agent -f ... -n ...``), so it can be killed with SIGKILL."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["start_agent_process"]


def start_agent_process(config: Path, name: str, *, timeout: float = 60.0) -> subprocess.Popen[str]:
    """Start ``artimon agent`` on ``config`` (its log appended to ``<config>.log``) and wait
    for its "running" line; ``RuntimeError`` if it does not come within ``timeout``."""
    with open(config.with_suffix(".log"), "a") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "artimon",
                "agent",
                "-f",
                str(config),
                "-n",
                name,
                "--no-monitor",
                "--reload-interval",
                "0",
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,
        )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    if not line or "running" not in line[0]:
        process.kill()
        process.wait()
        raise RuntimeError(f"agent {name} did not start: {line}; see {config.with_suffix('.log')}")
    return process
