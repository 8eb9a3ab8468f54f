"""The base of every launcher (``artimon.servers.ServerProcess``) on a server that starts in
a moment, Python's own ``http.server``: ready, kill -9 with the directory kept, restart on
the same data, stop by PID, and the log's tail when a server exits or is late."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from artimon.servers import ServerProcess, answers_ok, free_port
from bookkeeper import DirectoryInUseError
from bookkeeper.testing import running


class _HttpServer(ServerProcess):
    """``python -m http.server`` on ``data_dir`` (or ``command`` and ``ready`` of a test's own)."""

    def __init__(
        self, data_dir: Path, command: Sequence[str] = (), ready: Callable[[], bool] | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        default = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "-d", str(data_dir)]
        self.command = list(command) or [*default, str(self.port)]
        self.ready = ready or (lambda: answers_ok(self.url))
        super().__init__(data_dir, f"http.server on port {self.port}", "http.log", pid_file="http.pid")

    def _start(self, timeout: float) -> None:
        self._launch(self.command, self.ready, timeout)


def test_a_server_is_killed_restarted_on_its_data_and_stopped_by_pid(tmp_path: Path) -> None:
    server = _HttpServer(tmp_path).start(timeout=30)
    assert server.running and answers_ok(server.url)
    assert (tmp_path / "http.pid").read_text() == f"{server.pid}\n"
    killed = server.kill()  # a crash: the directory stays with this launcher
    assert not running(killed) and not server.running and not (tmp_path / "http.pid").exists()
    with pytest.raises(DirectoryInUseError):
        _HttpServer(tmp_path).start()
    server.start(timeout=30)  # again, on the same data and port
    assert server.pid != killed and answers_ok(server.url)
    before = server.pid
    server.restart(timeout=30)
    assert before is not None and not running(before) and answers_ok(server.url)
    last = server.pid
    server.stop()
    assert last is not None and not running(last) and not answers_ok(server.url)
    with _HttpServer(tmp_path) as other:  # the directory is free once stopped
        assert answers_ok(other.url)


def test_a_server_that_exits_or_is_late_fails_with_its_logs_tail_and_frees_its_directory(
    tmp_path: Path,
) -> None:
    exits = _HttpServer(tmp_path, [sys.executable, "-c", "print('no such option: -x', flush=True); exit(3)"])
    with pytest.raises(
        RuntimeError, match=r"(?s)exited with 3; last lines of .*http\.log:\nno such option: -x"
    ):
        exits.start(timeout=30)
    late = _HttpServer(tmp_path, [sys.executable, "-c", "import time; time.sleep(60)"], ready=lambda: False)
    with pytest.raises(RuntimeError, match=r"was not ready within 0\.5 s"):
        late.start(timeout=0.5)
    assert not late.running
    with _HttpServer(tmp_path) as server:
        assert answers_ok(server.url)
