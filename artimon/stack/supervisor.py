"""One supervisor for a declared list of components, in the spirit of Flume's
``LifecycleSupervisor``: ``artimon up`` and the test stack (``artimon.testing.Stack``) are
each a list of :class:`Component` run by a :class:`Supervisor`.

A component is a small object: ``name``, ``start()`` (returns once it serves, or raises),
``ready_lines()`` (its ``[ready]`` lines, printed once ``start()`` returned: none for a part
that says it is ready later, on a thread of its own, as Spark does) and ``stop()`` (safe to
call on a part that stopped already; returns a line to print, or ``None``). The supervisor
starts them in the order of the list and stops them in the reverse order, so each part
starts after, and stops before, what it uses.

States of the supervisor::

    NEW --start()--> STARTING --(every component started)--> RUNNING --stop()--> STOPPING --> STOPPED
                     STARTING --(a component raised)--> STOPPING (those started, in reverse) --> FAILED

A failed start stops what had started, in reverse order, then raises the component's error;
``stop()`` in any state stops what is running (a second call does nothing). The supervisor
does not restart a component that dies: a test that kills one (``Stack.kill_agent``) starts it
again itself.
"""

from __future__ import annotations

import contextlib
import enum
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

log = logging.getLogger(__name__)


class Component(Protocol):
    """A part of a stack (see the module doc)."""

    name: str

    def start(self) -> None: ...

    def ready_lines(self) -> list[str]: ...

    def stop(self) -> str | None: ...


class State(enum.Enum):
    NEW = "new"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


def _print(line: str) -> None:
    print(line, flush=True)


class Supervisor:
    """Starts ``components`` in order and stops them in reverse; ``say`` receives every ready
    line and every line a stop returns (``print`` by default)."""

    def __init__(self, components: Sequence[Component], say: Callable[[str], None] = _print) -> None:
        self.components = list(components)
        self.say = say
        self.state = State.NEW
        self._started: list[Component] = []

    def start(self) -> Supervisor:
        if self.state is not State.NEW:
            raise RuntimeError(f"the supervisor is {self.state.value}: it starts once")
        self.state = State.STARTING
        for component in self.components:
            try:
                component.start()
            except BaseException:
                log.error("%s did not start: stopping what started", component.name)
                self._started.append(component)  # a half-started part stops too
                with contextlib.suppress(Exception):  # logged there: the start's error is the one raised
                    self._stop_started()
                self.state = State.FAILED
                raise
            self._started.append(component)
            for line in component.ready_lines():
                self.say(line)
        self.state = State.RUNNING
        return self

    def stop(self) -> None:
        """Stop every started component in reverse order; the first error is raised once all
        had their turn."""
        if self.state in (State.STOPPED, State.FAILED, State.STOPPING):
            return
        try:
            self._stop_started()
        finally:
            self.state = State.STOPPED

    def _stop_started(self) -> None:
        self.state = State.STOPPING
        error: BaseException | None = None
        while self._started:
            component = self._started.pop()
            try:
                line = component.stop()
            except Exception as exc:  # the others still stop
                log.exception("%s did not stop cleanly", component.name)
                error = error or exc
                continue
            if line:
                self.say(line)
        if error is not None:
            raise error

    def __enter__(self) -> Supervisor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
