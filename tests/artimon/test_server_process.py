"""The base of every launcher (``artimon.servers.ServerProcess``, and ``ServerGroup`` for a
server of several processes) on a server that starts in a moment, Python's own
``http.server``: ready, kill -9 with the directory kept, restart on the same data, stop by
PID, and the log's tail when a server exits or is late."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from artimon.servers import ServerGroup, ServerProcess, answers_ok, free_port
from bookkeeper import DirectoryInUseError
from bookkeeper.ground import DirectoryLock
from bookkeeper.testing import running


class _HttpServer(ServerProcess):
    """``python -m http.server`` on ``data_dir`` (or ``command`` and ``ready`` of a test's own)."""

    def __init__(
        self,
        data_dir: Path,
        command: Sequence[str] = (),
        ready: Callable[[], bool] | None = None,
        lock: DirectoryLock | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        default = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "-d", str(data_dir)]
        self.command = list(command) or [*default, str(self.port)]
        self.ready = ready or (lambda: answers_ok(self.url))
        name = f"http.server on port {self.port}"
        super().__init__(data_dir, name, f"http-{self.port}.log", pid_file=f"http-{self.port}.pid", lock=lock)

    def _start(self, timeout: float) -> None:
        self._launch(self.command, self.ready, timeout)


def test_a_server_is_killed_restarted_on_its_data_and_stopped_by_pid(tmp_path: Path) -> None:
    server = _HttpServer(tmp_path).start(timeout=30)
    assert server.running and answers_ok(server.url)
    assert (tmp_path / f"http-{server.port}.pid").read_text() == f"{server.pid}\n"
    killed = server.kill()  # a crash: the directory stays with this launcher
    assert not running(killed) and not server.running and not (tmp_path / f"http-{server.port}.pid").exists()
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
        RuntimeError, match=r"(?s)exited with 3; last lines of .*http-\d+\.log:\nno such option: -x"
    ):
        exits.start(timeout=30)
    late = _HttpServer(tmp_path, [sys.executable, "-c", "import time; time.sleep(60)"], ready=lambda: False)
    with pytest.raises(RuntimeError, match=r"was not ready within 0\.5 s"):
        late.start(timeout=0.5)
    assert not late.running
    with _HttpServer(tmp_path) as server:
        assert answers_ok(server.url)


class _Pair(ServerGroup):
    """Two http.servers sharing the lock of one directory, as HDFS's two daemons do."""

    def __init__(self, data_dir: Path, second: Sequence[str] = ()) -> None:
        self.name = "a pair of http.servers"
        self._lock = DirectoryLock(data_dir, "the pair's launcher")
        self.first = _HttpServer(data_dir, lock=self._lock)
        self.second = _HttpServer(data_dir, second, lock=self._lock)
        self._processes = [self.second, self.first]

    def _start(self, timeout: float) -> None:
        self.first.start(timeout)
        self.second.start(timeout)


def test_a_group_starts_its_processes_as_one_and_restarts_only_those_down(tmp_path: Path) -> None:
    with _Pair(tmp_path) as pair:
        assert pair.running and pair.exited() == [] and pair.started_in_s > 0
        first = pair.first.pid
        pair.second.kill()
        assert not pair.running and pair.exited() == [pair.second.name]
        with pytest.raises(DirectoryInUseError):
            _Pair(tmp_path).start()
        pair.start(timeout=30)  # the one down again; the other kept
        assert pair.running and pair.first.pid == first and answers_ok(pair.second.url)
    assert first is not None and not running(first) and pair.exited() == [pair.second.name, pair.first.name]
    failing = _Pair(tmp_path, [sys.executable, "-c", "exit(3)"])
    with pytest.raises(RuntimeError, match="exited with 3"):
        failing.start(timeout=30)
    assert failing.first.pid is None  # a failed start stops what had started, and frees the directory
    with _Pair(tmp_path) as again:
        assert again.running
