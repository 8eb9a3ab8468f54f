"""``failover``: the live sink of highest priority works; a sink that fails sits out a
penalty of ``min(maxpenalty, 2**n s)`` after its n-th failure in a row, then is tried again.

Keys: ``priority.<sink>`` (higher wins; unset ones get -1, -2, ... in listing order),
``maxpenalty`` (ms, default 30000). ``BACKOFF`` is not a failure. When every sink failed it
raises ``EventDeliveryException`` ("nothing left to fail over to").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from collector_agent.context import Context
from collector_agent.exceptions import EventDeliveryException
from collector_agent.sink_processors.base import SinkProcessor
from collector_agent.sinks.base import Sink
from collector_agent.status import Status

__all__ = ["FailoverSinkProcessor"]

log = logging.getLogger(__name__)


@dataclass
class _Candidate:
    sink: Sink
    priority: int
    failures: int = 0
    retry_at: float = 0.0


class FailoverSinkProcessor(SinkProcessor):
    def configure(self, context: Context, sinks: Sequence[Sink]) -> None:
        super().configure(context, sinks)
        self.max_penalty = context.get_int("maxpenalty", 30000, minimum=0) / 1000
        candidates: list[_Candidate] = []
        unset = 0
        for sink in sinks:
            if f"priority.{sink.name}" in context:
                priority = context.get_int(f"priority.{sink.name}")
            else:
                unset -= 1
                priority = unset
            if any(c.priority == priority for c in candidates):
                raise context.error(f"priority.{sink.name}", f"priority {priority} is already taken")
            candidates.append(_Candidate(sink, priority))
        self._candidates = sorted(candidates, key=lambda c: -c.priority)

    def _penalize(self, candidate: _Candidate, exc: Exception) -> None:
        candidate.failures += 1
        penalty = min(self.max_penalty, float(2 ** min(candidate.failures, 30)))
        candidate.retry_at = time.monotonic() + penalty
        log.warning("sink %s failed (%s); penalty %.0f s", candidate.sink.name, exc, penalty)

    def process(self) -> Status:
        now = time.monotonic()
        for candidate in self._candidates:
            if candidate.retry_at > now:
                continue
            try:
                status = candidate.sink.process()
            except Exception as exc:
                self._penalize(candidate, exc)
                continue
            candidate.failures = 0
            candidate.retry_at = 0.0
            return status
        raise EventDeliveryException("All sinks failed to process, nothing left to failover to")

    @property
    def active(self) -> Sink | None:
        """The sink that would be tried first now."""
        now = time.monotonic()
        return next((c.sink for c in self._candidates if c.retry_at <= now), None)
