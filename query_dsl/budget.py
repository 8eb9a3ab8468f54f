"""Memory budgets of queries, in bytes: what Prometheus's ``--query.max-samples`` (per query)
and ``--query.max-concurrency`` (for all queries) bound in its engine.

- A :class:`QueryBudget` per query. The engines charge it with :meth:`QueryBudget.need`
  before they allocate: the estimate of what a step is about to make (a matrix of series x
  evaluation times with the temporaries numpy makes computing it, what ``count_values``,
  ``topk``, a join or a subquery create, an answer's JSON) once its input's size is known.
  Past the query's budget (:attr:`query_dsl.Limits.max_bytes`) the step is refused with a
  :class:`~query_dsl.QueryLimitError` naming the budget and the estimate, before it
  allocates. A step's temporaries are given back when it ends (:meth:`QueryBudget.settle`
  keeps only the value it answers).
- One :class:`MemoryBudget` per process (the query API's). Every query's charges are taken
  from it as they come; a query that finds it spent waits up to ``wait_s`` for the others to
  give bytes back, then fails with :class:`~query_dsl.QueryBusyError` (HTTP 503 with
  ``Retry-After``). A query gives everything back when it ends (:meth:`QueryBudget.close`).
  A waiting query keeps what it holds: two that wait on each other's bytes give up after
  ``wait_s`` (a 503), they never hang.
- When no query has run for ``RETURN_DELAY_S`` and those since the last time held at least
  ``RETURN_AFTER_BYTES``, the process's freed memory goes back to the kernel
  (:func:`bookkeeper.ground.release_freed_memory`, from a thread of the budget's own: a
  query's answer is still alive when its budget closes, so the return waits for it to be
  dropped): otherwise the allocators keep it, and the API's resident memory stays at its
  largest working set ever (``returns`` counts it). Unless the process's resident memory is
  at most ``reserve_share`` above what it was right after the last return: then the freed
  pages are kept as a working reserve (``kept`` counts it), which the next large query reuses
  instead of faulting its temporaries in again (issue 27: after a pause, a 1M-series
  division faulted ~38K pages anew, about a quarter of its time).

The estimates bound what numpy allocates and what an answer's Python objects take
(tests/query_dsl/test_budget.py measures them against ``tracemalloc``), so the API's
resident memory is its baseline (the interpreter, its libraries, an in-process store) plus
at most the process's budget (the same test reads it from ``/proc``). A fetch is charged as
it arrives: before it, VHMS's own ``max_points_per_query`` bounds it.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import TracebackType

from bookkeeper.ground import release_freed_memory
from query_dsl.exceptions import QueryBusyError, QueryLimitError

__all__ = [
    "DEFAULT_PROCESS_BYTES",
    "DEFAULT_QUERY_BYTES",
    "DEFAULT_WAIT_S",
    "MemoryBudget",
    "QueryBudget",
    "size_text",
]

MIB = 1 << 20
DEFAULT_QUERY_BYTES = 1024 * MIB  # a query's working set; about 60M cells of float64 answered as JSON: 7M
DEFAULT_PROCESS_BYTES = 4096 * MIB  # every query of the process: a sixth of a 24 GiB machine
DEFAULT_WAIT_S = 5.0  # how long a query waits for the others' bytes before its 503
RETURN_AFTER_BYTES = 16 * MIB  # queries' charges between two returns of freed memory, at least
RETURN_DELAY_S = 0.2  # no query running for this long: the answers are sent and dropped
# freed memory kept while the resident memory is at most this share above its size after the last
# return: a 1M-series store's process (~0.83 GiB after a return) keeps a division's ~0.2 GiB of
# temporaries (a quarter was not always enough: every other query faulted them in again), a
# 100K one's (~0.21 GiB) kept 40 MiB after query_bench's queries
RESERVE_SHARE = 0.5


def resident_bytes() -> int:
    """This process's resident memory (0 where ``/proc`` does not say)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def size_text(nbytes: int) -> str:
    """``nbytes`` for a message: MiB (GiB past ten thousand MiB)."""
    if nbytes >= 10_000 * MIB:
        return f"{nbytes / (1 << 30):,.1f} GiB"
    return f"{nbytes / MIB:,.1f} MiB"


class MemoryBudget:
    """The bytes every query of a process may hold at once (a semaphore counted in bytes).
    ``in_use`` is what the running queries hold, ``peak`` its highest; ``waits`` and
    ``refusals`` count the charges that waited and those that gave up (503), ``returns`` the
    times freed memory went back to the kernel, ``kept`` those it was kept as the reserve
    (see the module doc)."""

    def __init__(
        self,
        max_bytes: int = DEFAULT_PROCESS_BYTES,
        wait_s: float = DEFAULT_WAIT_S,
        reserve_share: float = RESERVE_SHARE,
    ) -> None:
        if max_bytes <= 0 or wait_s < 0 or reserve_share < 0:
            raise ValueError(
                "a memory budget needs max_bytes > 0, wait_s >= 0 and reserve_share >= 0, "
                f"got {max_bytes}, {wait_s}, {reserve_share}"
            )
        self.max_bytes = max_bytes
        self.wait_s = wait_s
        self.reserve_share = reserve_share
        self.kept = 0
        self._returned_to = 0  # resident bytes right after the last return (0: none yet)
        self.in_use = 0
        self.peak = 0
        self.waits = 0
        self.refusals = 0
        self.returns = 0
        self._released = 0  # bytes given back since the last return to the kernel
        self._return_due = False
        self._last_release = 0.0  # monotonic time of the last release
        self._waiting = 0  # charges waiting for bytes
        self._returner: threading.Thread | None = None
        # taken as itself where no one waits on a condition (a Condition's own enter and exit
        # are Python calls: a small query's few charges and its release paid 1 us each)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # bytes given back, for the charges that wait
        self._due = threading.Condition(self._lock)  # a return fell due, for the returner thread

    def acquire(self, nbytes: int, what: str) -> None:
        """Take ``nbytes`` (waiting up to ``wait_s`` for them), or :class:`QueryBusyError`."""
        deadline = time.monotonic() + self.wait_s
        with self._changed:
            if self.in_use + nbytes > self.max_bytes:
                self.waits += 1
            while self.in_use + nbytes > self.max_bytes:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.refusals += 1
                    raise QueryBusyError(
                        f"the queries running hold {size_text(self.in_use)} of the "
                        f"{size_text(self.max_bytes)} all queries may hold, and {what} needs "
                        f"{size_text(nbytes)} more: try again when they are done",
                        retry_after_s=max(1, round(self.wait_s)),
                    )
                self._waiting += 1
                try:
                    self._changed.wait(left)
                finally:
                    self._waiting -= 1
            self.in_use += nbytes
            self.peak = max(self.peak, self.in_use)

    def take_now(self, nbytes: int, what: str) -> None:
        """Take ``nbytes`` if they are free now, else :class:`QueryBusyError` at once, neither
        counted as a wait nor as a refusal: the caller (a query run on the event loop, which
        must not wait) runs again where it may wait."""
        with self._lock:
            if self.in_use + nbytes > self.max_bytes:
                message = f"{what} needs {size_text(nbytes)} that are not free now"
                raise QueryBusyError(message, retry_after_s=1)
            self.in_use += nbytes
            self.peak = max(self.peak, self.in_use)

    def release(self, nbytes: int) -> None:
        with self._lock:
            self.in_use -= nbytes
            self._released += nbytes
            self._last_release = time.monotonic()
            if self._waiting:
                self._changed.notify_all()
            if self.in_use == 0 and self._released >= RETURN_AFTER_BYTES and not self._return_due:
                self._return_due = True
                if self._returner is None:
                    self._returner = threading.Thread(
                        target=self._return_freed, name="memory-return", daemon=True
                    )
                    self._returner.start()
                self._due.notify()

    def _return_freed(self) -> None:
        """The returner thread: once the queries that held much have ended and none ran for
        ``RETURN_DELAY_S`` (their answers sent and dropped: what they allocated is free),
        the freed memory goes back to the kernel, outside the lock, or is kept as the reserve
        (the module doc). Woken once when a return falls due, then by its own timeouts: never
        by the releases of the queries that run meanwhile (a wake per release cost every small
        query a thread switch)."""
        while True:
            with self._due:
                while not self._return_due:
                    self._due.wait()
                while (left := self._last_release + RETURN_DELAY_S - time.monotonic()) > 0 or self.in_use:
                    self._due.wait(left if left > 0 else RETURN_DELAY_S)
                self._return_due = False
                self._released = 0
            if 0 < resident_bytes() <= self._returned_to * (1 + self.reserve_share):
                with self._due:
                    self.kept += 1
                continue
            release_freed_memory()
            self._returned_to = resident_bytes()
            with self._due:
                self.returns += 1

    def query(self, max_bytes: int = DEFAULT_QUERY_BYTES, *, wait: bool = True) -> QueryBudget:
        """A query's budget drawing on this one (at most all of it); with ``wait`` false, its
        charges never wait (:meth:`take_now`)."""
        return QueryBudget(min(max_bytes, self.max_bytes), self, wait=wait)


class QueryBudget:
    """One query's working set: ``used`` bytes now (``peak`` at most), at most ``max_bytes``,
    drawn from ``pool`` when there is one (waiting for it unless ``wait`` is false). A context
    manager that gives everything back. Used by the one thread that runs the query (the pool
    is the shared part)."""

    def __init__(
        self, max_bytes: int = DEFAULT_QUERY_BYTES, pool: MemoryBudget | None = None, *, wait: bool = True
    ) -> None:
        if max_bytes <= 0:
            raise ValueError(f"a query's memory budget must be positive, got {max_bytes}")
        self.max_bytes = max_bytes
        self.pool = pool
        self.wait = wait
        self.used = 0
        self.peak = 0

    def need(self, nbytes: int, what: str) -> None:
        """Charge ``nbytes`` that ``what`` is about to allocate: :class:`QueryLimitError`
        past the query's budget, :class:`QueryBusyError` when the process's stays spent."""
        nbytes = max(int(nbytes), 0)
        total = self.used + nbytes
        if total > self.max_bytes:
            raise QueryLimitError(
                "query processing would load too many samples into memory in query execution: "
                f"{what} needs an estimated {size_text(nbytes)}, which takes the query's working "
                f"set to {size_text(total)}, over its budget of {size_text(self.max_bytes)} "
                "(max_bytes; artimon api --query-max-mib)"
            )
        if self.pool is not None:
            if self.wait:
                self.pool.acquire(nbytes, what)
            else:
                self.pool.take_now(nbytes, what)
        self.used = total
        self.peak = max(self.peak, total)

    def settle(self, mark: int, nbytes: int, what: str) -> None:
        """A step that began with ``mark`` bytes used ends holding ``nbytes`` more (its
        value): give back its temporaries, or charge what it made beyond its estimate."""
        target = mark + max(int(nbytes), 0)
        if target > self.used:
            self.need(target - self.used, what)
            return
        self._give_back(self.used - target)

    def close(self) -> None:
        """Give back everything (the query is done)."""
        self._give_back(self.used)

    def _give_back(self, nbytes: int) -> None:
        self.used -= nbytes
        if self.pool is not None and nbytes:
            self.pool.release(nbytes)

    def __enter__(self) -> QueryBudget:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
