"""Where a request of Prometheus's API runs: on the event loop, or in the thread pool.

The thread pool keeps the event loop free while a wide query runs, but its hand-off costs
every request two thread switches (the loop to a worker and back), each a wait for the
scheduler: on a loaded machine (load 15 on 2 cores) a 1-hour ``stddev_over_time`` of 12
series, about 2 ms of CPU, took 39 ms in the pool, most of the compliance queries' p95. A
request runs on the loop ("inline") when

- the source reads memory of this process (:class:`vhms.LocalClient`): a fetch over the
  network waits on its shards, and would stop every other request meanwhile;
- and the same request (its route, query text or selectors and number of evaluation steps:
  the caller's ``key``) took less than ``INLINE_CPU_S`` of CPU the last time it ran. The cost
  of the last ``REMEMBERED`` requests is kept (least recently used first out).

A request not remembered runs in the pool, which measures it, whether it answers or fails (an
error is as cheap to answer again). An inline run is held on a
leash: its deadline is ``INLINE_LEASH_S`` (the query's own when that is shorter) and its memory
charges never wait for the process's budget (:meth:`query_dsl.MemoryBudget.take_now`); past
either it is given up, runs again in the pool, and is remembered as large. Costs are read and
written on the event loop's thread only.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from starlette.concurrency import run_in_threadpool

from query_dsl.budget import QueryBudget
from query_dsl.evaluator import Limits
from query_dsl.exceptions import QueryBusyError, QueryLimitError

if TYPE_CHECKING:
    from query_dsl.http.context import ApiContext

__all__ = ["INLINE_CPU_S", "INLINE_LEASH_S", "REMEMBERED", "Placement"]

INLINE_CPU_S = 0.005  # a request cheaper than this, last time, runs on the loop (a loaded machine's CPU
# time of a 2 ms query is 3-4 ms: its caches are shared)
INLINE_LEASH_S = 0.1  # wall time: the CPU bound with room for a loaded machine's preemption (~20 ms a slice)
REMEMBERED = 4096

T = TypeVar("T")
Work = Callable[["ApiContext", QueryBudget], T]


class Placement:
    """Runs requests inline or in the thread pool (see the module doc); ``inline`` false: the
    pool always (a source that reads over the network)."""

    def __init__(self, inline: bool, remembered: int = REMEMBERED) -> None:
        self.inline = inline
        self.remembered = remembered
        self._costs: OrderedDict[Hashable, float] = OrderedDict()
        self.inline_runs = 0
        self.pool_runs = 0
        self.given_up = 0  # inline runs that passed the leash and ran again in the pool
        self._leashed: tuple[ApiContext, ApiContext] | None = None  # an app's context and its leashed copy

    def cost(self, key: Hashable) -> float | None:
        """The CPU seconds ``key``'s last run took (infinite: it was given up inline)."""
        return self._costs.get(key)

    def _remember(self, key: Hashable, cpu_s: float) -> None:
        self._costs[key] = cpu_s
        self._costs.move_to_end(key)
        while len(self._costs) > self.remembered:
            self._costs.popitem(last=False)

    async def run(self, api: ApiContext, key: Hashable, work: Work[T]) -> tuple[T, QueryBudget]:
        """``work``'s result and the budget it charged (the caller closes it once the answer
        is sent); ``work``'s exceptions are raised, its budget closed."""
        done = self.run_now(api, key, work)
        if done is not None:
            return done
        spent: list[float] = []
        try:
            return await run_in_threadpool(_measured, api, work, spent)
        finally:
            self.pool_runs += 1
            if spent:  # a request that failed is remembered too: its error (a query that does not
                # parse, a bad regular expression) is answered as cheaply the next time
                self._remember(key, spent[0])

    def run_now(self, api: ApiContext, key: Hashable, work: Work[T]) -> tuple[T, QueryBudget] | None:
        """:meth:`run`'s answer when it runs inline (on the caller's thread, the event loop's),
        else None: not known to be small, or given up on the leash (then remembered as large)."""
        known = self._costs.get(key)
        if self.inline and known is not None and known < INLINE_CPU_S:
            return self._inline(api, key, work)
        return None

    def _leash(self, api: ApiContext) -> ApiContext:
        """``api`` with its timeout no longer than the leash (made once per context)."""
        if self._leashed is None or self._leashed[0] is not api:
            base = api.limits or Limits()
            self._leashed = (
                api,
                replace(api, limits=replace(base, timeout_s=min(base.timeout_s, INLINE_LEASH_S))),
            )
        return self._leashed[1]

    def _inline(self, api: ApiContext, key: Hashable, work: Work[T]) -> tuple[T, QueryBudget] | None:
        """``work`` on the leash, or None when it passed it (its budget closed)."""
        leashed = self._leash(api)
        budget = api.query_budget(wait=False)
        started, cpu = time.monotonic(), time.thread_time()
        try:
            result = work(leashed, budget)
        except QueryLimitError as exc:
            budget.close()
            if not isinstance(exc, QueryBusyError) and time.monotonic() - started < INLINE_LEASH_S:
                raise  # the query's own limit, or its own shorter timeout
            self.given_up += 1
            self._remember(key, math.inf)
            return None
        except BaseException:
            budget.close()
            raise
        self.inline_runs += 1
        self._remember(key, time.thread_time() - cpu)
        return result, budget


def _measured(api: ApiContext, work: Work[T], spent: list[float]) -> tuple[T, QueryBudget]:
    """``work`` in a worker thread, the CPU it took there added to ``spent`` (whether it
    answers or raises)."""
    budget = api.query_budget()
    cpu = time.thread_time()
    try:
        result = work(api, budget)
    except BaseException:
        budget.close()
        raise
    finally:
        spent.append(time.thread_time() - cpu)
    return result, budget
