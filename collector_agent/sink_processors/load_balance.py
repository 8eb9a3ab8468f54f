"""``load_balance``: spreads batches over the sinks of a group.

Keys: ``selector`` (``round_robin`` default, or ``random``), ``backoff`` (default false:
with true a failed sink is left out for ``min(selector.maxTimeOut, 2**n s)`` after its n-th
failure in a row), ``selector.maxTimeOut`` (ms, default 30000). A sink that throws passes
the turn to the next one; an empty channel (``BACKOFF``) ends the round, as in Flume.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Sequence

from collector_agent.context import Context
from collector_agent.exceptions import EventDeliveryException
from collector_agent.sink_processors.base import SinkProcessor
from collector_agent.sinks.base import Sink
from collector_agent.status import Status

__all__ = ["LoadBalancingSinkProcessor"]


class LoadBalancingSinkProcessor(SinkProcessor):
    min_sinks = 2

    def configure(self, context: Context, sinks: Sequence[Sink]) -> None:
        super().configure(context, sinks)
        selector = context.get_str("selector", "round_robin").strip()
        if selector not in ("round_robin", "random"):
            raise context.error("selector", f"{selector!r} is neither round_robin nor random")
        self.selector = selector
        self.backoff = context.get_bool("backoff", False)
        self.max_timeout = context.get_int("selector.maxTimeOut", 30000, minimum=0) / 1000
        self._turn = itertools.count()
        self._random = random.Random()
        self._failures = dict.fromkeys(range(len(self.sinks)), 0)
        self._excluded_until = dict.fromkeys(range(len(self.sinks)), 0.0)

    def _order(self) -> list[int]:
        indexes = list(range(len(self.sinks)))
        if self.selector == "random":
            self._random.shuffle(indexes)
            return indexes
        start = next(self._turn) % len(indexes)
        return indexes[start:] + indexes[:start]

    def process(self) -> Status:
        now = time.monotonic()
        errors = []
        for index in self._order():
            if self.backoff and self._excluded_until[index] > now:
                continue
            try:
                status = self.sinks[index].process()
            except Exception as exc:
                errors.append(f"{self.sinks[index].name}: {exc}")
                self._failures[index] += 1
                if self.backoff:
                    penalty = min(self.max_timeout, float(2 ** min(self._failures[index], 16)))
                    self._excluded_until[index] = now + penalty
                continue
            self._failures[index] = 0
            return status
        raise EventDeliveryException(
            "Unable to deliver event. " + "; ".join(errors or ["all sinks backing off"])
        )
