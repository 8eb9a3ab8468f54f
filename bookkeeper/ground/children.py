"""Child processes that die with their parent.

A process Artimon launches (ZooKeeper's JVM, an agent, a VHMS shard, a test application)
must not outlive the process that launched it: after a ``kill -9`` of ``artimon up`` its
ZooKeeper kept running on the same data directory as the next one. :func:`spawn` is
``subprocess.Popen`` whose child, on Linux, is SIGKILLed by the kernel when its parent
dies, however it dies (``prctl(PR_SET_PDEATHSIG)``, set by a tiny wrapper that then
``exec``\\ s the program, so the PID is the program's own).

Linux sends that signal when the *thread* that forked the child ends, not the process, so
a child started from a short-lived thread would be killed with that thread. ``spawn``
therefore forks from one thread per process that lives as long as the process does.

Elsewhere than Linux, ``spawn`` is plain ``Popen``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

__all__ = ["die_with_parent_command", "spawn", "terminate"]

_WRAPPER = Path(__file__).with_name("_die_with_parent.py")

_requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
_spawner: threading.Thread | None = None
_spawner_lock = threading.Lock()


def _resolve(program: str, env: Mapping[str, str] | None) -> str:
    """``program``'s path as ``Popen`` would find it (a missing one raises here, as Popen
    does, rather than in the wrapper where it would only be an exit status)."""
    path = env.get("PATH") if env is not None else None
    found = shutil.which(program, path=path) if os.sep not in program else program
    if found is None or not os.access(found, os.X_OK):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    return os.path.abspath(found)


def die_with_parent_command(command: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """``command`` prefixed by the wrapper that makes it die with this process (Linux)."""
    if sys.platform != "linux":
        return list(command)
    program = _resolve(command[0], env)
    return [sys.executable, "-I", "-S", str(_WRAPPER), str(os.getpid()), program, *command[1:]]


def _serve() -> None:
    while True:
        call, future = _requests.get()
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(call())
            except BaseException as exc:  # handed to the caller, raised there
                future.set_exception(exc)
        del call, future  # the caller owns the process now: keep no reference to it


def _on_spawner(call: Callable[[], Any]) -> Any:
    """Run ``call`` on the spawner thread (started on first use, and again in a forked child,
    which inherits no threads)."""
    global _spawner
    with _spawner_lock:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(target=_serve, name="artimon-spawner", daemon=True)
            _spawner.start()
    future: Future[Any] = Future()
    _requests.put((call, future))
    return future.result()


def spawn(command: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(command, **popen_kwargs)`` whose child dies with this process
    (see the module doc); ``FileNotFoundError`` if the program is not found."""
    wrapped = die_with_parent_command(command, popen_kwargs.get("env"))
    process: subprocess.Popen[Any] = _on_spawner(lambda: subprocess.Popen(wrapped, **popen_kwargs))
    return process


def terminate(process: subprocess.Popen[Any], grace: float) -> None:
    """End ``process`` by its PID: SIGTERM, then SIGKILL after ``grace`` seconds; reaped."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        process.wait()
