"""Children die with their parent, and a data directory serves one live process at a time
(``bookkeeper.ground``, through the ZooKeeper launcher that uses both)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from artimon.servers import ZooKeeperServer, four_letter_word
from bookkeeper import DirectoryInUseError
from bookkeeper.ground import DirectoryLock, spawn
from bookkeeper.testing import running

# Starts ZooKeeper from a thread that ends at once (Linux ties the parent-death signal to
# the thread that forked), prints the server's PID and port, then waits to be killed.
LAUNCHER = """
import sys, threading, time
from artimon.servers import ZooKeeperServer
server = ZooKeeperServer(sys.argv[1], tick_time_ms=500)
thread = threading.Thread(target=server.start)
thread.start()
thread.join()
print(server.pid, server.port, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_zookeeper_dies_with_its_launcher_and_frees_the_directory(
    tmp_path: Path, wait: Callable[..., None]
) -> None:
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert launcher.stdout is not None
        pid, port = (int(word) for word in launcher.stdout.readline().split())
        assert running(pid) and four_letter_word("127.0.0.1", port) == "imok"
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=30)
        wait(lambda: not running(pid), timeout=15, what=f"ZooKeeper (pid {pid}) to die with its launcher")
    finally:
        if launcher.poll() is None:
            launcher.kill()
        launcher.communicate()
    # the kernel released the lock with the last holder: the next server starts at once
    with ZooKeeperServer(tmp_path, tick_time_ms=500) as again:
        assert four_letter_word("127.0.0.1", again.port) == "imok"


@pytest.mark.slow
def test_a_second_server_on_a_held_data_directory_is_refused_naming_the_holder(tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path, tick_time_ms=500) as first:
        second = ZooKeeperServer(tmp_path, tick_time_ms=500)
        with pytest.raises(DirectoryInUseError) as refused:
            second.start()
        message = str(refused.value)
        assert f"pid {os.getpid()} (zookeeper launcher" in message
        assert f"pid {first.pid} (zookeeper server on port {first.port})" in message
        assert second.process is None and four_letter_word("127.0.0.1", second.port) == ""
        assert four_letter_word("127.0.0.1", first.port) == "imok"
    with second:  # once the first has stopped, the directory is free
        assert four_letter_word("127.0.0.1", second.port) == "imok"


def test_a_lock_names_its_live_holders_and_is_free_once_they_exit(tmp_path: Path) -> None:
    held = DirectoryLock(tmp_path, "the first").acquire()
    child = spawn([sys.executable, "-c", "import time; time.sleep(600)"], pass_fds=[held.fd])
    held.share_with(child.pid, "its child")
    try:
        held.release()  # the child still holds the directory through its descriptor
        with pytest.raises(DirectoryInUseError, match=rf"in use by pid {child.pid} \(its child\)"):
            DirectoryLock(tmp_path, "the second").acquire()
    finally:
        child.kill()
        child.wait()
    with DirectoryLock(tmp_path, "the second") as second:
        assert second.held
        assert (tmp_path / "in_use.lock").read_text() == f"{os.getpid()} the second\n"


def test_spawn_reports_a_missing_program_as_popen_does(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        spawn(["artimon-no-such-program"])
    with pytest.raises(FileNotFoundError):
        spawn([str(tmp_path / "missing")])
