"""``artimon up`` leaves nothing behind when it is killed with SIGKILL, and its data
directory serves one ``artimon up`` at a time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bookkeeper.testing import descendants, running

ARTIMON = [sys.executable, "-m", "artimon"]


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ARTIMON_ZK"}  # its own ZooKeeper
    env["ARTIMON_SPARK_DRIVER_MEMORY"] = "1g"
    return env


def _wait_for_line(process: subprocess.Popen[str], prefix: str, timeout: float) -> list[str]:
    """Lines printed until one starts with ``prefix`` (which is the last)."""
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith(prefix):
                found.set()
                return

    threading.Thread(target=read, daemon=True).start()
    if not found.wait(timeout):
        raise AssertionError(f"no {prefix!r} line within {timeout} s: {lines}")
    return lines


@pytest.mark.slow
def test_up_killed_with_sigkill_leaves_no_process_and_holds_its_directory_while_alive(
    tmp_path: Path, wait: Callable[..., None]
) -> None:
    data = tmp_path / "data"
    command = [*ARTIMON, "up", "--data-dir", str(data), "--api-port", "0", "--interval", "1"]
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=_environment())
    try:
        _wait_for_line(first, "[ready] spark", timeout=240)

        second = subprocess.run(
            [*command, "--no-spark"], capture_output=True, text=True, timeout=120, env=_environment()
        )
        assert second.returncode == 1, second.stderr
        assert f"in use by pid {first.pid} (artimon up)" in second.stderr

        children = descendants(first.pid)
        zookeeper = int((data / "zookeeper" / "zookeeper.pid").read_text())
        assert zookeeper in children
        java = [pid for pid in children if Path(f"/proc/{pid}/exe").resolve().name == "java"]
        assert len(java) >= 2, "ZooKeeper's and Spark's JVMs"
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        started = time.monotonic()
        wait(lambda: not any(running(pid) for pid in children), timeout=60, what="every child to die")
        took = time.monotonic() - started
    finally:
        if first.poll() is None:
            first.kill()
        first.communicate()
    assert took < 30, f"children took {took:.1f} s to die"

    # nothing holds the directory any more: the next one starts on the same data
    third = subprocess.run(
        [*command, "--no-spark", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=180,
        env=_environment(),
    )
    assert third.returncode == 0, third.stderr
    assert third.stdout.splitlines()[-1] == "stopped."
