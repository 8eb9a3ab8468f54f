"""Runners: a thread per pollable source and per sink group, calling ``process`` in a loop.

After n ``BACKOFF`` results (or failures) in a row a runner sleeps
``min(max_backoff, increment * 2**(n-1))`` seconds; ``READY`` resets n. A failure is logged
once per burst (then counted only) and once more when the runner recovers; it never ends
the thread. A destination that cannot take a batch now (``EventDeliveryException``: a
store restarting, a next hop down) is an expected condition of a pipeline: one warning
line; anything else is a bug, logged with its traceback. ``stop`` wakes the runner and
joins it.

States: IDLE --start()--> RUNNING --stop()--> STOPPED
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from collector_agent.exceptions import EventDeliveryException
from collector_agent.status import Status

__all__ = ["Runner"]

log = logging.getLogger(__name__)


class Runner:
    def __init__(
        self,
        name: str,
        process: Callable[[], Status],
        *,
        increment: float = 0.1,
        max_backoff: float = 5.0,
    ) -> None:
        self.name = name
        self.process = process
        self.increment = increment
        self.max_backoff = max_backoff
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"runner-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        consecutive = 0
        failing = 0
        while not self._stop.is_set():
            try:
                status = self.process()
            except EventDeliveryException as exc:
                self.failures += 1
                if failing == 0:
                    log.warning(
                        "%s: %s (retrying; further failures in this burst are counted only)", self.name, exc
                    )
                failing += 1
                status = Status.BACKOFF
            except Exception:
                self.failures += 1
                if failing == 0:
                    log.exception("%s failed (further failures in this burst are counted only)", self.name)
                failing += 1
                status = Status.BACKOFF
            else:
                if failing:
                    log.warning("%s recovered after %d failures", self.name, failing)
                    failing = 0
            if status is Status.READY:
                consecutive = 0
                continue
            consecutive += 1
            delay = min(self.max_backoff, self.increment * 2 ** min(consecutive - 1, 30))
            self._stop.wait(delay)
