"""Harnesses for tests, benchmarks and demos: a bookkeeper application in its own process,
and a way to expire a ZooKeeper session the way a network partition would.

``python -m bookkeeper.testing --context web --variables 1000`` runs an application that
keeps ``--variables`` INTEGER counters (``test.counter{i=<n>}``) plus one variable of each
other type, serves them, registers in ZooKeeper (``--zk`` or ``$ARTIMON_ZK``) and prints
``READY <host> <port> <uuid>`` once serving; with ``--endpoints N`` it serves N contexts
(``<context>-0`` ...) and prints a READY line for each. Every ``--tick`` seconds each counter grows by
one. With ``--aligned S`` the counters follow :func:`formula_value` instead: from a tenth of
an S-second round before round R starts until a tenth before the next, ``test.counter{i=n}``
holds ``formula_value(n, R, S * 1000)``, so whoever polls round R can check every value it
got (the accounting harness does). It stops on SIGTERM or when its standard input closes
(with ``--ignore-stdin``, on SIGTERM only: a launcher gives it no standard input).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from kazoo.client import KazooClient

from bookkeeper._bookkeeper import Bookkeeper
from bookkeeper.ground import spawn
from bookkeeper.variables import IntegerVar

__all__ = ["AppProcess", "expire_session", "formula_value", "main", "populate", "start_app"]


def populate(bk: Bookkeeper, variables: int) -> None:
    """Give ``bk`` ``variables`` counters plus one DOUBLE, BOOLEAN and STRING variable."""
    for i in range(variables):
        bk.integer("test.counter", i=str(i)).set(i)
    bk.double("test.gauge").set(0.5)
    bk.boolean("test.up").set(True)
    bk.string("test.version").set("1.0 beta")


def formula_value(i: int, round_ms: int, interval_ms: int) -> int:
    """What ``test.counter{i=<i>}`` of an ``--aligned`` application holds for a round."""
    return (round_ms // interval_ms) * (i + 1) + i


def _set_formula(counters: list[IntegerVar], per_context: int, interval_ms: int) -> int:
    """Set the values of the round under way (a tenth of a round early); return that round."""
    current = (int(time.time() * 1000) + interval_ms // 10) // interval_ms * interval_ms
    for n, counter in enumerate(counters):
        counter.set(formula_value(n % per_context, current, interval_ms))
    return current


def _follow_formula(
    counters: list[IntegerVar], per_context: int, interval_ms: int, stop: threading.Event
) -> None:
    while True:
        current = _set_formula(counters, per_context, interval_ms)
        if stop.wait(max(0.0, (current + interval_ms * 0.9) / 1000 - time.time())):
            return


@dataclass
class AppProcess:
    """A running ``python -m bookkeeper.testing`` process."""

    process: subprocess.Popen[str]
    endpoints: list[tuple[str, int, str]]  # (host, port, uuid) of each context served

    @property
    def host(self) -> str:
        """The first context's address (the only one unless ``endpoints`` > 1)."""
        return self.endpoints[0][0]

    @property
    def port(self) -> int:
        return self.endpoints[0][1]

    @property
    def uuid(self) -> str:
        return self.endpoints[0][2]

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
    endpoints: int = 1,
    aligned: float = 0.0,
    env: Mapping[str, str] | None = None,
) -> AppProcess:
    """Start an application process (serving ``endpoints`` contexts; it dies with this
    process) and wait until each context is READY; ``aligned`` > 0 makes its counters follow
    :func:`formula_value`; ``env`` is added to its environment (``ARTIMON_ZK_AUTH_FILE``...)."""
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
        "--endpoints",
        str(endpoints),
        "--aligned",
        str(aligned),
    ]
    if zk_hosts:
        command += ["--zk", zk_hosts]
    else:
        command += ["--no-register"]
    process = spawn(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, **env} if env else None,
    )
    ready: list[str] = []

    def read_ready() -> None:
        for _ in range(endpoints):
            ready.append(process.stdout.readline())  # type: ignore[union-attr]

    reader = threading.Thread(target=read_ready, daemon=True)
    reader.start()
    reader.join(timeout)
    if len(ready) < endpoints or not all(line.startswith("READY ") for line in ready):
        process.kill()
        raise RuntimeError(f"test app {context} did not become ready: {ready!r}")
    served = [(host, int(port), uuid) for _, host, port, uuid in (line.split() for line in ready)]
    return AppProcess(process, served)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bookkeeper.testing", description=__doc__)
    parser.add_argument("--context", default="test")
    parser.add_argument("--variables", type=int, default=10)
    parser.add_argument("--zk", default=None)
    parser.add_argument("--no-register", action="store_true")
    parser.add_argument("--session-timeout", type=float, default=10.0)
    parser.add_argument("--tick", type=float, default=0.0, help="grow counters every N s (0: never)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--endpoints", type=int, default=1, help="contexts served by this process")
    parser.add_argument("--aligned", type=float, default=0.0, help="follow formula_value for S-second rounds")
    parser.add_argument("--ignore-stdin", action="store_true", help="stop on SIGTERM only")
    args = parser.parse_args(argv)

    contexts = (
        [args.context] if args.endpoints == 1 else [f"{args.context}-{n}" for n in range(args.endpoints)]
    )
    served = []
    for context in contexts:
        bk = Bookkeeper(context)
        populate(bk, args.variables)
        if args.aligned:  # before serving, so that no poll sees populate's values
            counters = [bk.integer("test.counter", i=str(i)) for i in range(args.variables)]
            _set_formula(counters, args.variables, int(args.aligned * 1000))
        server = bk.serve(
            args.host,
            0,
            zk_hosts=args.zk,
            register=not args.no_register,
            session_timeout=args.session_timeout,
        )
        served.append((bk, server))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def stop_on_stdin_close() -> None:
        sys.stdin.read()
        stop.set()

    if not args.ignore_stdin:
        threading.Thread(target=stop_on_stdin_close, daemon=True).start()
    for _, server in served:
        print(f"READY {server.host} {server.port} {server.uuid}", flush=True)
    counters = [bk.integer("test.counter", i=str(i)) for bk, _ in served for i in range(args.variables)]
    if args.aligned:
        _follow_formula(counters, args.variables, int(args.aligned * 1000), stop)
    while not stop.wait(args.tick or None):
        for counter in counters:
            counter.add(1)
    for bk, _ in served:
        bk.close()
    return 0
