"""The lifecycle every component shares, and the base class that keeps its counters.

States (Flume's ``LifecycleState``)::

    IDLE --start()--> START --stop()--> STOP --start()--> START
      IDLE --start() fails--> ERROR   (a component that cannot open its resources, e.g. a
                                       file channel whose directory is unusable)
"""

from __future__ import annotations

import enum
from typing import ClassVar

from collector_agent.context import Context
from collector_agent.counters import CounterGroup

__all__ = ["Component", "LifecycleState"]


class LifecycleState(enum.Enum):
    IDLE = "IDLE"
    START = "START"
    STOP = "STOP"
    ERROR = "ERROR"


class Component:
    """Base of sources, channels and sinks: a name, a state, a configuration, counters.

    Subclasses set ``kind`` (``SOURCE``, ``CHANNEL``, ``SINK``) and ``counter_names``,
    read their keys in :meth:`configure`, and call ``super()`` in ``start``/``stop``.
    """

    kind: ClassVar[str] = "COMPONENT"
    counter_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str) -> None:
        self.name = name
        self.state = LifecycleState.IDLE
        self.context = Context()
        self.counters = CounterGroup(self.kind, name, self.counter_names)

    def configure(self, context: Context) -> None:
        """Read the configuration; raise ``ConfigurationError`` naming a bad key."""
        self.context = context

    def start(self) -> None:
        self.state = LifecycleState.START
        self.counters.started()

    def stop(self) -> None:
        self.state = LifecycleState.STOP
        self.counters.stopped()

    def metrics(self) -> dict[str, float]:
        """The component's counters with Flume's names, plus ``StartTime`` and ``StopTime``."""
        return self.counters.snapshot()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.state.value}>"
