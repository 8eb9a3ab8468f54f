"""The processes of the test stack, and any command in a process of its own:
:func:`start_ready_process` starts a command and waits for its ready line,
:func:`start_agent_process` one ``artimon agent``, :class:`StackProcess` holds one (signals,
stop, memory); ``Process`` and ``AgentProcess`` are the stack's components of one process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bookkeeper.ground import spawn

__all__ = ["AgentProcess", "Process", "StackProcess", "start_agent_process", "start_ready_process"]


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


@dataclass
class StackProcess:
    """A component's process, its log, and the first line it printed."""

    process: subprocess.Popen[str]
    log: Path
    ready_line: str

    def send(self, sig: int) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        """Send ``sig`` and wait for the end (SIGKILL after ``timeout``); the exit status."""
        self.send(sig)
        try:
            status = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait(timeout)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
        return status

    def rss_bytes(self) -> int:
        """Resident memory now (Linux ``/proc``)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no VmRSS for pid {self.process.pid}")


class Process:
    """A component that is one process of ours, ready once it printed ``ready``; stopped with
    SIGTERM (or ``sig``); ``running`` while it runs."""

    def __init__(self, name: str, command: Callable[[], list[str]], log: Path, ready: str) -> None:
        self.name = name
        self.command = command
        self.log = log
        self.ready = ready
        self.running: StackProcess | None = None

    def start(self) -> None:
        process, line = start_ready_process(self.command(), self.log, self.ready)
        self.running = StackProcess(process, self.log, line)

    def ready_lines(self) -> list[str]:
        return [self.running.ready_line] if self.running else []

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.running is not None:
            self.running.stop(sig)
            self.running = None


class AgentProcess(Process):
    """``artimon agent`` on the stack's properties, reloading them every half second."""

    def __init__(self, config: Path, monitor_port: int) -> None:
        super().__init__("agent", list, config.with_suffix(".log"), "running")
        self.config = config
        self.monitor_port = monitor_port

    def start(self) -> None:
        process = start_agent_process(self.config, "a", monitor_port=self.monitor_port, reload_interval=0.5)
        self.running = StackProcess(process, self.log, self.ready)
