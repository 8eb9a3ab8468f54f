"""Waiting for Ctrl-C or SIGTERM in the foreground commands, and a launcher of
:mod:`artimon.servers` run so (``artimon zk``, ``hdfs``, ``kafka``)."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bookkeeper import DirectoryInUseError

if TYPE_CHECKING:  # the commands that only wait for Ctrl-C import no launcher
    from artimon.servers import Launcher
    from bookkeeper.zk import Registration


def stop_event() -> threading.Event:
    """An event set by SIGINT or SIGTERM (so both stop a command cleanly)."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def serve_until_stopped(
    server: Launcher,
    command: str,
    what: str,
    ready: Callable[[], str],
    data_dir: Path,
    register: Callable[[], Registration | None] = lambda: None,
) -> int:
    """Start ``server``, print ``ready()``, and run until Ctrl-C or SIGTERM (0, "``what``
    stopped.") or until one of its processes exits (1, naming it); 1 too if it cannot start
    (its directory held, its jars not resolved, not ready in time), the reason on stderr.
    ``register()``, once it serves, makes its registration for ``artimon status`` (closed
    before it stops), if it has one."""
    stop = stop_event()
    try:
        server.start()
    except (DirectoryInUseError, RuntimeError) as exc:  # RuntimeError: JarResolutionError too
        print(f"artimon {command}: {exc}", file=sys.stderr)
        return 1
    print(ready(), flush=True)
    registration = register()
    try:
        while not stop.wait(1.0):
            if exited := server.exited():
                print(f"{', '.join(exited)} exited unexpectedly; see its log in {data_dir}", flush=True)
                return 1
    finally:
        if registration is not None:
            registration.close()
        server.stop()
    print(f"{what} stopped.", flush=True)
    return 0
