"""Harnesses for tests, benchmarks and demos: a bookkeeper application in its own process,
and a way to expire a ZooKeeper session the way a network partition would.

``python -m bookkeeper.testing --context web --variables 1000`` runs an application that
keeps ``--variables`` INTEGER counters (``test.counter{i=<n>}``) plus one variable of each
other type, serves them, registers in ZooKeeper (``--zk`` or ``$ARTIMON_ZK``) and prints
``READY <host> <port> <uuid>`` once serving. Every ``--tick`` seconds each counter grows by
one. It stops on SIGTERM or when its standard input closes.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass

from kazoo.client import KazooClient

from bookkeeper._bookkeeper import Bookkeeper

__all__ = ["AppProcess", "expire_session", "populate", "start_app"]


def populate(bk: Bookkeeper, variables: int) -> None:
    """Give ``bk`` ``variables`` counters plus one DOUBLE, BOOLEAN and STRING variable."""
    for i in range(variables):
        bk.integer("test.counter", i=str(i)).set(i)
    bk.double("test.gauge").set(0.5)
    bk.boolean("test.up").set(True)
    bk.string("test.version").set("1.0 beta")


@dataclass
class AppProcess:
    """A running ``python -m bookkeeper.testing`` process."""

    process: subprocess.Popen[str]
    host: str
    port: int
    uuid: str

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL), wait for the end, release the pipes."""
        if self.process.poll() is None:
            os.kill(self.process.pid, sig)
        self.process.wait(timeout=30)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


def start_app(
    context: str,
    zk_hosts: str | None,
    *,
    variables: int = 10,
    session_timeout: float = 10.0,
    tick: float = 0.0,
    timeout: float = 60.0,
) -> AppProcess:
    """Start an application process and wait for its READY line."""
    command = [
        sys.executable,
        "-m",
        "bookkeeper.testing",
        "--context",
        context,
        "--variables",
        str(variables),
        "--session-timeout",
        str(session_timeout),
        "--tick",
        str(tick),
    ]
    if zk_hosts:
        command += ["--zk", zk_hosts]
    else:
        command += ["--no-register"]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    if not ready or not ready[0].startswith("READY "):
        process.kill()
        raise RuntimeError(f"test app {context} did not become ready: {ready!r}")
    _, host, port, uuid = ready[0].split()
    return AppProcess(process, host, int(port), uuid)


def expire_session(connect: str, client: KazooClient, timeout: float = 10.0) -> None:
    """Expire ``client``'s session as the server would after a partition: a second
    connection with the same session id and password closes it (kazoo's own harness does
    the same)."""
    session_id, password = client.client_id
    lost = threading.Event()
    client.add_listener(lambda state: lost.set() if state == "LOST" else None)
    twin = KazooClient(hosts=connect, client_id=(session_id, password))
    twin.start(timeout=timeout)
    twin.stop()
    twin.close()
    if not lost.wait(timeout):
        raise RuntimeError(f"session {session_id:#x} did not expire within {timeout} s")


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bookkeeper.testing", description=__doc__)
    parser.add_argument("--context", default="test")
    parser.add_argument("--variables", type=int, default=10)
    parser.add_argument("--zk", default=None)
    parser.add_argument("--no-register", action="store_true")
    parser.add_argument("--session-timeout", type=float, default=10.0)
    parser.add_argument("--tick", type=float, default=0.0, help="grow counters every N s (0: never)")
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)

    bk = Bookkeeper(args.context)
    populate(bk, args.variables)
    server = bk.serve(
        args.host,
        0,
        zk_hosts=args.zk,
        register=not args.no_register,
        session_timeout=args.session_timeout,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def stop_on_stdin_close() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=stop_on_stdin_close, daemon=True).start()
    print(f"READY {server.host} {server.port} {server.uuid}", flush=True)
    counters = [bk.integer("test.counter", i=str(i)) for i in range(args.variables)]
    while not stop.wait(args.tick or None):
        for counter in counters:
            counter.add(1)
    bk.close()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
