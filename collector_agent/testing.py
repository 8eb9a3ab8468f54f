"""Harness for tests, benchmarks and demos: an agent in a process of its own, as an
operator runs it (``artimon agent -f ... -n ...``), so it can be killed with SIGKILL. The
processes started here die with the process that started them
(:func:`bookkeeper.ground.spawn`)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from bookkeeper.ground import spawn

__all__ = ["start_agent_process", "start_ready_process"]


def start_agent_process(
    config: Path,
    name: str,
    *,
    timeout: float = 60.0,
    monitor_port: int | None = None,
    reload_interval: float = 0.0,
) -> subprocess.Popen[str]:
    """Start ``artimon agent`` on ``config`` (its log appended to ``<config>.log``) and wait
    for its "running" line; ``RuntimeError`` if it does not come within ``timeout``. The
    agent serves its metrics on ``monitor_port`` if given, and re-reads ``config`` every
    ``reload_interval`` seconds if that is not 0."""
    monitor = ["--no-monitor"] if monitor_port is None else ["--monitor-port", str(monitor_port)]
    command = [sys.executable, "-m", "artimon", "agent", "-f", str(config), "-n", name, *monitor]
    command += ["--reload-interval", str(reload_interval)]
    process, _ = start_ready_process(command, config.with_suffix(".log"), "running", timeout)
    return process


def start_ready_process(
    command: list[str], log: Path, ready: str, timeout: float = 60.0
) -> tuple[subprocess.Popen[str], str]:
    """Start ``command`` in a session of its own (stderr appended to ``log``) and wait for its
    first line of output, which must contain ``ready``; returns the process and that line.
    ``RuntimeError`` (the process killed) if it does not come within ``timeout``."""
    with open(log, "a") as log_file:
        process = spawn(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
            start_new_session=True,
        )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    if not line or ready not in line[0]:
        process.kill()
        process.wait()
        raise RuntimeError(f"{' '.join(command[2:5])} did not start: {line}; see {log}")
    return process, line[0].strip()
