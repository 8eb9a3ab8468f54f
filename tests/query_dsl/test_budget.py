"""Query memory budgets (query_dsl.budget): a query's working set is estimated before each
step allocates and refused past its budget (422 on Prometheus's API with Prometheus's
message, 413 on the DSL's), queries share the process's budget (a wait, then 503 with
Retry-After), the estimates bound what numpy allocates (tracemalloc), and four of issue
28's ``count_values`` range queries at once keep a real API server's resident memory within
its budget (/proc)."""

from __future__ import annotations

import argparse
import inspect
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest

from artimon.arguments.api import add_budget_arguments
from bookkeeper.ground import BackgroundServer
from query_dsl import (
    Evaluator,
    Limits,
    MemoryBudget,
    QueryBudget,
    QueryBusyError,
    QueryLimitError,
    create_app,
)
from query_dsl.budget import (
    DEFAULT_PROCESS_BYTES,
    DEFAULT_QUERY_BYTES,
    DEFAULT_WAIT_S,
    RETURN_AFTER_BYTES,
    RETURN_DELAY_S,
)
from query_dsl.promql import range_query
from vhms import LocalClient
from vhms.server import Store

MIB = 1 << 20
STEP_S = 10
PROMETHEUS_MESSAGE = "query processing would load too many samples into memory in query execution"
COUNT_VALUES = 'count_values("v", rate({__name__=~".+"}[1m]))'


def fill(store: Store, series: int, seconds: int, end_s: int) -> None:
    """Counters of ``series`` series every 10 s for ``seconds`` up to ``end_s``."""
    keys = [f'm{i % 7}{{i="{i}",g="{i % 5}"}}' for i in range(series)]
    rng = np.random.default_rng(1)
    values = np.zeros(series)
    for t in range(end_s - seconds, end_s + 1, STEP_S):
        values += rng.integers(0, 2, series)
        store.ingest(keys, values.copy(), np.full(series, t * 1000))


END_S = int(time.time()) // STEP_S * STEP_S


@pytest.fixture(scope="module")
def source() -> LocalClient:
    store = Store("10s:400")
    fill(store, 60, 3600, END_S)
    return LocalClient(store)


# -- the budgets ---------------------------------------------------------------------------


def test_a_query_over_its_budget_is_refused_naming_the_budget_and_the_estimate() -> None:
    budget = QueryBudget(100 * MIB)
    budget.need(60 * MIB, "a first step")
    with pytest.raises(QueryLimitError) as refused:
        budget.need(50 * MIB, "count_values' 3 series")
    message = str(refused.value)
    assert message.startswith(PROMETHEUS_MESSAGE)
    assert "count_values' 3 series needs an estimated 50.0 MiB" in message
    assert "working set to 110.0 MiB, over its budget of 100.0 MiB" in message
    assert budget.used == 60 * MIB  # nothing taken for the refused step
    budget.settle(0, 10 * MIB, "the value")
    assert (budget.used, budget.peak) == (10 * MIB, 60 * MIB)


def test_queries_share_the_process_budget_waiting_then_503() -> None:
    pool = MemoryBudget(100 * MIB, wait_s=0.3)
    first = pool.query(80 * MIB)
    first.need(80 * MIB, "the first query")
    started = time.monotonic()
    with pytest.raises(QueryBusyError) as busy:
        pool.query(80 * MIB).need(30 * MIB, "the second query")
    assert time.monotonic() - started >= 0.3 and busy.value.retry_after_s >= 1
    assert "hold 80.0 MiB of the 100.0 MiB" in str(busy.value)
    assert (pool.waits, pool.refusals) == (1, 1)

    granted = threading.Event()
    waiting = MemoryBudget(100 * MIB, wait_s=30)
    holder = waiting.query()
    holder.need(90 * MIB, "a holder")

    def second() -> None:
        with waiting.query() as query:
            query.need(50 * MIB, "a waiter")
            granted.set()

    thread = threading.Thread(target=second)
    thread.start()
    deadline = time.monotonic() + 10
    while waiting.waits == 0 and time.monotonic() < deadline:  # the waiter is waiting
        time.sleep(0.01)
    assert not granted.is_set()
    holder.close()
    thread.join(10)
    assert granted.is_set() and waiting.in_use == 0 and waiting.peak == 90 * MIB


def test_the_flags_defaults_are_the_budgets() -> None:
    parser = argparse.ArgumentParser()
    add_budget_arguments(parser)
    args = parser.parse_args([])
    assert args.query_max_mib * MIB == DEFAULT_QUERY_BYTES == Limits().max_bytes
    assert args.query_budget_mib * MIB == DEFAULT_PROCESS_BYTES
    assert args.query_wait == DEFAULT_WAIT_S


# -- the estimates bound what is allocated -------------------------------------------------

QUERIES = [
    "m1",
    "rate(m1[1m])",
    "irate(m2[1m])",
    COUNT_VALUES,
    'count_values("v", m1)',
    "sum by (g) (rate(m1[5m]))",
    "topk(3, m1)",
    "m1 + on(i) m1",
    "m1 or m2",
    "m1 > 5",
    "-m1",
    "abs(m1)",
    "avg_over_time(m1[2m])",
    "max_over_time(m1[10m:30s])",
    "deriv(m1[5m])",
    "timestamp(m1)",
]


@pytest.mark.parametrize("query", QUERIES)
def test_the_estimate_bounds_what_numpy_allocates(source: LocalClient, query: str) -> None:
    """The budget's peak is at least tracemalloc's (numpy reports its buffers to it), with
    1 MiB of room for the small objects no step charges; so is the answer's estimate."""
    budget = QueryBudget(1 << 40)
    tracemalloc.start()
    try:
        result = range_query(source, query, END_S - 3000, END_S, 1, budget=budget)
        _, evaluated = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        result.to_prometheus_body()  # what the API writes
        _, answered = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert evaluated <= budget.peak + MIB, f"{evaluated / MIB:.1f} MiB > {budget.peak / MIB:.1f} MiB"
    assert answered <= result.answer_bytes() + MIB, (
        f"{answered / MIB:.1f} > {result.answer_bytes() / MIB:.1f}"
    )


def test_a_dsl_query_is_charged_for_its_fetches(source: LocalClient) -> None:
    evaluator = Evaluator(source, now_ms=END_S * 1000, limits=Limits(max_bytes=64 * 1024))
    with pytest.raises(QueryLimitError, match="fetch\\('m1'\\)'s 9 series needs an estimated"):
        evaluator.evaluate('fetch("m1", last=1h, resolution=10s) | map(rate, 1m)')
    assert Evaluator(source, now_ms=END_S * 1000).evaluate('fetch("m1", last=1h) | reduce(sum)')


def test_count_values_counts_each_distinct_value_once(source: LocalClient) -> None:
    """The same answer as counting the samples one by one."""
    result = range_query(source, 'count_values by (g) ("v", m1)', END_S - 600, END_S, 30)
    rows = range_query(source, "m1", END_S - 600, END_S, 30).value
    expected: dict[tuple[str, str, int], int] = {}
    for labels, row in zip(rows.labels, rows.values, strict=True):
        for column, value in enumerate(row.tolist()):
            if value == value:
                key = (labels["g"], f"{value:g}", column)
                expected[key] = expected.get(key, 0) + 1
    got = {
        (labels["g"], labels["v"], column): int(value)
        for labels, row in zip(result.value.labels, result.value.values, strict=True)
        for column, value in enumerate(row.tolist())
        if value == value
    }
    assert got == expected and len(got) > 10


# -- over HTTP -----------------------------------------------------------------------------


def given_back(held: Callable[[], float]) -> None:
    """Polls until the queries hold no bytes (a query gives them back once its answer is sent)."""
    deadline = time.monotonic() + 10
    while held() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert held() == 0


def in_use(url: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("artimon_query_budget_in_use_bytes "):
            return float(line.split()[1])
    raise AssertionError("no artimon_query_budget_in_use_bytes")


@pytest.fixture(scope="module")
def small_budget_api(source: LocalClient) -> Iterator[tuple[BackgroundServer, MemoryBudget]]:
    pool = MemoryBudget(64 * MIB, wait_s=0.2)
    app = create_app(source, limits=Limits(max_bytes=MIB // 2, timeout_s=30), budget=pool)
    server = BackgroundServer(app, "127.0.0.1", 0, name="test-budget-api")
    server.start()
    yield server, pool
    server.stop()


def test_over_budget_is_422_on_prometheus_api_and_413_on_the_dsl(
    small_budget_api: tuple[BackgroundServer, MemoryBudget],
) -> None:
    server, pool = small_budget_api
    params = {"query": COUNT_VALUES, "start": END_S - 3000, "end": END_S, "step": 1}
    answer = httpx.get(f"{server.url}/prometheus/api/v1/query_range", params=params, timeout=60)
    body = answer.json()
    assert answer.status_code == 422 and body["errorType"] == "execution", body
    assert body["error"].startswith(PROMETHEUS_MESSAGE) and "over its budget of 0.5 MiB" in body["error"]
    dsl = httpx.post(
        f"{server.url}/api/v1/query", json={"query": 'fetch("~m.*", last=1h, resolution=10s)'}, timeout=60
    )
    assert dsl.status_code == 413 and "over its budget of 0.5 MiB" in dsl.json()["error"]["message"]
    small = httpx.get(f"{server.url}/prometheus/api/v1/query", params={"query": "sum(m1)"}, timeout=60)
    assert small.status_code == 200
    given_back(lambda: pool.in_use)
    assert "artimon_query_budget_peak_bytes" in httpx.get(f"{server.url}/metrics", timeout=10).text


def test_a_spent_process_budget_is_503_with_retry_after(
    small_budget_api: tuple[BackgroundServer, MemoryBudget],
) -> None:
    server, pool = small_budget_api
    pool.acquire(pool.max_bytes, "the test")  # every byte held by "another query"
    try:
        answer = httpx.get(f"{server.url}/prometheus/api/v1/query", params={"query": "m1"}, timeout=60)
        dsl = httpx.post(f"{server.url}/api/v1/query", json={"query": 'fetch("m1", last=10m)'}, timeout=60)
    finally:
        pool.release(pool.max_bytes)
    assert answer.status_code == 503 and answer.json()["errorType"] == "unavailable", answer.text
    assert int(answer.headers["retry-after"]) >= 1
    assert dsl.status_code == 503 and int(dsl.headers["retry-after"]) >= 1
    assert httpx.get(f"{server.url}/prometheus/api/v1/query", params={"query": "m1"}, timeout=60).is_success


# -- issue 28's query, four at once, on a real server in a process of its own ---------------

SERVER = """
import sys
import numpy as np
from bookkeeper.ground import BackgroundServer
from query_dsl import Limits, MemoryBudget, create_app
from vhms import LocalClient
from vhms.server import Store

STEP_S = {step}
{fill}
store = Store("10s:1200")
fill(store, 1007, 3 * 3600 + 120, {end})
budget = MemoryBudget({pool}, wait_s=60)
app = create_app(LocalClient(store), limits=Limits(max_bytes={query}, timeout_s=120), budget=budget)
server = BackgroundServer(app, "127.0.0.1", 0, name="budget-api")
server.start()
print(server.url, flush=True)
sys.stdin.read()
server.stop()
"""


def memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.mark.slow
def test_four_count_values_range_queries_keep_the_server_within_its_budget(tmp_path: Path) -> None:
    """Issue 28: 1,007 series, 3 h at a 1 s step, four at once. Each is answered within its
    budget or refused before it allocates; the server's peak resident memory (VmHWM, reset
    once the store is loaded and a first query ran) stays within the process's budget."""
    pool, query = 512 * MIB, 384 * MIB
    script = SERVER.format(step=STEP_S, fill=inspect.getsource(fill), end=END_S, pool=pool, query=query)
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        params = {"query": COUNT_VALUES, "start": END_S - 3 * 3600, "end": END_S, "step": 1}
        warm = httpx.get(f"{url}/prometheus/api/v1/query", params={"query": COUNT_VALUES}, timeout=120)
        assert warm.status_code == 200, warm.text
        baseline = memory_kib(child.pid, "VmRSS")
        Path(f"/proc/{child.pid}/clear_refs").write_text("5")  # VmHWM starts again from VmRSS

        def ask(_: int) -> httpx.Response:
            return httpx.get(f"{url}/prometheus/api/v1/query_range", params=params, timeout=600)

        with ThreadPoolExecutor(4) as pool_of_four:
            answers = list(pool_of_four.map(ask, range(4)))
        peak = memory_kib(child.pid, "VmHWM")
        for answer in answers:
            assert answer.status_code in (200, 422, 503), answer.text[:300]
            if answer.status_code == 422:
                assert PROMETHEUS_MESSAGE in answer.json()["error"]
        assert any(answer.status_code == 200 for answer in answers)
        grew = (peak - baseline) * 1024
        print(f"baseline {baseline / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB, grew {grew / MIB:.0f} MiB")
        print([answer.status_code for answer in answers])
        assert grew <= pool, f"the server grew {grew / MIB:.0f} MiB, over its {pool / MIB:.0f} MiB budget"
        figures = dict(
            line.split()
            for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines()
            if line.startswith("artimon_query_budget")
        )
        print(figures)
        assert float(figures["artimon_query_budget_peak_bytes"]) <= pool
        given_back(lambda: in_use(url))
    finally:
        for pipe in (child.stdin, child.stdout):
            if pipe is not None:
                pipe.close()
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def returned(pool: MemoryBudget, count: int, timeout: float = 30.0) -> bool:
    """Whether ``pool`` has returned freed memory ``count`` times within ``timeout``."""
    deadline = time.monotonic() + timeout
    while pool.returns < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return pool.returns == count


def test_freed_memory_is_returned_once_the_queries_that_held_much_have_ended() -> None:
    pool = MemoryBudget(1 << 30)
    large, small = pool.query(), pool.query()
    large.need(RETURN_AFTER_BYTES, "a large fetch")
    small.need(MIB, "a small one")
    large.close()
    assert not returned(pool, 1, timeout=3 * RETURN_DELAY_S)  # a query still runs: its memory is not free
    small.close()
    assert returned(pool, 1)
    with pool.query() as another:
        another.need(MIB, "a small query alone")
    assert not returned(pool, 2, timeout=3 * RETURN_DELAY_S)  # too little held since to be worth one


def test_freed_memory_is_kept_as_a_reserve_while_the_process_stays_near_its_size_at_the_last_return() -> None:
    pool = MemoryBudget(1 << 30, reserve_share=100.0)  # any size this test process reaches is near
    for returns, kept in ((1, 0), (1, 1), (1, 2)):  # the first return gives back: none came before it
        with pool.query() as large:
            large.need(RETURN_AFTER_BYTES, "a large fetch")
        deadline = time.monotonic() + 30
        while pool.returns + pool.kept < returns + kept and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (pool.returns, pool.kept) == (returns, kept)
    with pytest.raises(ValueError, match="reserve_share"):
        MemoryBudget(reserve_share=-1)
