"""Counter groups with Flume's names (``CHANNEL.c1``: ``EventPutSuccessCount``...).

A group is a plain dict of ints behind one increment method; exporting turns it into
Flume's JSON shape (numbers, not strings) or the Prometheus text format.
"""

from __future__ import annotations

import threading
import time

__all__ = ["CounterGroup"]


class CounterGroup:
    """Counters of one component: ``kind`` is ``SOURCE``, ``CHANNEL`` or ``SINK``."""

    def __init__(self, kind: str, name: str, names: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.name = name
        self._lock = threading.Lock()
        self._values: dict[str, int] = dict.fromkeys(names, 0)
        self.start_time = 0
        self.stop_time = 0

    @property
    def group(self) -> str:
        return f"{self.kind}.{self.name}"

    def add(self, counter: str, amount: int = 1) -> None:
        with self._lock:
            self._values[counter] = self._values.get(counter, 0) + amount

    def set(self, counter: str, value: int) -> None:
        """Set a gauge (a count of things now, not of events)."""
        with self._lock:
            self._values[counter] = value

    def get(self, counter: str) -> int:
        return self._values.get(counter, 0)

    def started(self) -> None:
        self.start_time = int(time.time() * 1000)
        self.stop_time = 0

    def stopped(self) -> None:
        self.stop_time = int(time.time() * 1000)

    def snapshot(self) -> dict[str, float]:
        """Every counter, plus ``Type``-less ``StartTime`` and ``StopTime`` (epoch ms)."""
        with self._lock:
            values: dict[str, float] = dict(self._values)
        values["StartTime"] = self.start_time
        values["StopTime"] = self.stop_time
        return values
