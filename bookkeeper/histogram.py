"""Latency histograms over the ordinary variable types, as Prometheus lays them out.

``bk.histogram("rpc_seconds", buckets=(0.01, 0.1, 1), method="get")`` keeps the series::

    rpc_seconds_bucket{le=0.01,method=get}   INTEGER  observations <= 0.01 (cumulative)
    rpc_seconds_bucket{le=0.1,method=get}    INTEGER  observations <= 0.1
    rpc_seconds_bucket{le=1.0,method=get}    INTEGER  observations <= 1
    rpc_seconds_bucket{le=+Inf,method=get}   INTEGER  every observation
    rpc_seconds_sum{method=get}              DOUBLE   their sum
    rpc_seconds_count{method=get}            INTEGER  their count (the +Inf bucket)

They are ordinary variables: served, exported, polled and stored like any other, and
``histogram_quantile`` of the query language reads the ``_bucket`` series.

Why observe is cheap: it finds the bucket with one C bisect and, under the bookkeeper's
lock, adds one to that bucket's own (not cumulative) count and the value to the sum. The
cumulative counts are written into the bucket variables when the bookkeeper takes a
snapshot (every poll, serve and export goes through one), under the same lock, so a
snapshot is a consistent cut; ``get()`` of a bucket's handle reads what the last snapshot
wrote. :meth:`Histogram.counts` reads the live counts.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bookkeeper.exceptions import InvalidValueError

if TYPE_CHECKING:
    from bookkeeper.variables import DoubleVar, IntegerVar

__all__ = ["DEFAULT_BUCKETS", "Histogram", "check_buckets", "format_bound"]

# prometheus_client's defaults: 5 ms to 10 s, for request latencies in seconds
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
)


def check_buckets(buckets: Sequence[float]) -> tuple[float, ...]:
    """Finite, strictly increasing upper bounds (a trailing +Inf is dropped: it is always there)."""
    bounds = [float(b) for b in buckets]
    if bounds and bounds[-1] == math.inf:
        bounds.pop()
    if not bounds:
        raise InvalidValueError(f"a histogram needs at least one finite bucket bound, got {list(buckets)!r}")
    if not all(math.isfinite(b) for b in bounds):
        raise InvalidValueError(f"histogram bucket bounds must be finite numbers, got {list(buckets)!r}")
    if any(a >= b for a, b in itertools.pairwise(bounds)):
        raise InvalidValueError(f"histogram bucket bounds must increase strictly, got {list(buckets)!r}")
    return tuple(bounds)


def format_bound(bound: float) -> str:
    """The ``le`` label of a bound, as prometheus_client writes it (``0.5``, ``1.0``, ``+Inf``)."""
    return "+Inf" if bound == math.inf else repr(float(bound))


class Histogram:
    """A histogram's handle (module doc); made by ``Bookkeeper.histogram``, cached per series."""

    __slots__ = ("_buckets", "_count", "_counts", "_lock", "_sum", "_sum_var", "_total", "bounds", "name")

    def __init__(
        self,
        name: str,
        bounds: tuple[float, ...],
        lock: threading.Lock,
        buckets: list[IntegerVar],
        sum_var: DoubleVar,
        count_var: IntegerVar,
    ) -> None:
        self.name = name
        self.bounds = bounds
        self._lock = lock
        self._buckets = buckets  # one per bound, then +Inf
        self._sum_var = sum_var
        self._count = count_var
        self._counts = [0] * (len(bounds) + 1)  # per bucket, not cumulative
        self._sum = 0.0
        self._total = -1  # observations already written into the variables

    def observe(self, value: float) -> None:
        """Count one observation (a latency in seconds, say): the hot path."""
        if value != value:  # NaN: it would make the sum NaN for good
            raise InvalidValueError(f"histogram {self.name} refuses NaN")
        index = bisect.bisect_left(self.bounds, value)
        with self._lock:
            self._counts[index] += 1
            self._sum += value

    def counts(self) -> tuple[list[int], float]:
        """The live cumulative counts (one per bound, then +Inf) and the sum."""
        with self._lock:
            own, total = list(self._counts), self._sum
        cumulative, running = [], 0
        for count in own:
            running += count
            cumulative.append(running)
        return cumulative, total

    def _publish(self) -> None:
        """Write the cumulative counts into the variables; called with the lock held."""
        total = sum(self._counts)
        if total == self._total:
            return
        now = time.time()
        running = 0
        for count, var in zip(self._counts, self._buckets, strict=True):
            running += count
            var._value, var._ts = running, now
        self._sum_var._value, self._sum_var._ts = self._sum, now
        self._count._value, self._count._ts = total, now
        self._total = total
