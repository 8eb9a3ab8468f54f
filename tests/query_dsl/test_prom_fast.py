"""Prometheus's routes served in pure ASGI (query_dsl/http/prom_fast.py) answer what FastAPI's
routes answer, and where each request runs (query_dsl/http/placement.py): known small
requests over an in-process store on the event loop, the rest in the thread pool, an inline
run past its leash or short of memory given up and run again in the pool; and the query
string reads as Starlette reads it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from hypothesis import given, settings
from hypothesis import strategies as st

from bookkeeper.ground import BackgroundServer
from query_dsl import Limits, MemoryBudget, QueryBudget, QueryBusyError, QueryLimitError, create_app
from query_dsl.http import MAX_BODY_BYTES, ApiContext
from query_dsl.http.placement import INLINE_CPU_S, INLINE_LEASH_S
from query_dsl.http.prom_params import query_params
from vhms import FetchResult, LocalClient
from vhms.server import Store

NOW_S = int(time.time()) // 60 * 60
RANGE = {"query": "sum(up)", "start": str(NOW_S - 600), "end": str(NOW_S), "step": "10"}


def _store() -> Store:
    store = Store("10s:200")
    keys = [f"up{{job=j{i % 2},instance=i{i}}}" for i in range(4)]
    for point in range(60):
        store.ingest(keys, np.ones(4) * point, np.full(4, (NOW_S - 590 + point * 10) * 1000))
    return store


class _Client(httpx.Client):
    """An HTTP client of a served app, which it holds."""

    app: FastAPI


@contextmanager
def _served(app: FastAPI, token: str | None = None) -> Iterator[_Client]:
    server = BackgroundServer(app, name="test-prom-fast")
    server.start()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with _Client(base_url=server.url, headers=headers, timeout=30) as served:
            served.app = app
            yield served
    finally:
        server.stop()


@pytest.fixture(scope="module")
def client() -> Iterator[_Client]:
    with _served(create_app(LocalClient(_store()), token="s3cret"), "s3cret") as served:
        yield served


def _api(client: _Client) -> ApiContext:
    api: ApiContext = client.app.state.api
    return api


def test_get_and_post_form_answer_alike(client: _Client) -> None:
    got = client.get("/prometheus/api/v1/query_range", params=RANGE)
    posted = client.post("/prometheus/api/v1/query_range", data=RANGE)
    assert got.status_code == posted.status_code == 200
    assert got.headers["content-type"] == "application/json"
    assert got.content == posted.content
    body = got.json()
    assert body["status"] == "success" and body["data"]["resultType"] == "matrix"
    assert body["data"]["result"][0]["values"][-1] == [NOW_S, "236"]  # 4 series at 59


def test_errors_are_prometheus_json(client: _Client) -> None:
    answer = client.get("/prometheus/api/v1/query_range", params={**RANGE, "step": "0"})
    assert answer.status_code == 400
    assert answer.json()["errorType"] == "bad_data" and "step" in answer.json()["error"]
    answer = client.post(
        "/prometheus/api/v1/query",
        content=b"query=\xff",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 400 and answer.json()["error"] == "the form body is not URL-encoded UTF-8"
    answer = client.get("/prometheus/api/v1/query", params={"query": "sum("})
    assert answer.status_code == 400 and answer.json()["status"] == "error"


def test_a_form_body_over_the_limit_is_refused_before_it_is_read(client: _Client) -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    declared = client.post(
        "/prometheus/api/v1/query", content=b"query=" + b"1" * MAX_BODY_BYTES, headers=form
    )

    def streamed() -> Iterator[bytes]:  # no Content-Length: chunked
        yield b"query="
        yield b"1" * MAX_BODY_BYTES

    chunked = client.post("/prometheus/api/v1/query", content=streamed(), headers=form)
    for answer in (declared, chunked):
        assert answer.status_code == 413 and answer.headers["connection"] == "close"
        assert answer.json()["error"]["kind"] == "HTTPException"
    assert f"declares {MAX_BODY_BYTES + 6:,} bytes" in declared.json()["error"]["message"]
    assert "while it was read" in chunked.json()["error"]["message"]
    assert client.post("/prometheus/api/v1/query", data={"query": "1"}).status_code == 200


def test_the_token_and_other_methods_go_to_fastapi(client: _Client) -> None:
    for headers in ({"Authorization": "Bearer wrong"}, {"Authorization": ""}):
        answer = client.get("/prometheus/api/v1/labels", headers=headers)
        assert answer.status_code == 401
        assert answer.json() == {
            "error": {"kind": "HTTPException", "message": "a valid bearer token is required"}
        }
    assert client.request("PUT", "/prometheus/api/v1/query", params=RANGE).status_code == 405
    assert client.get("/prometheus/api/v1/labels").json()["data"] == ["__name__", "instance", "job"]
    paths = client.get("/openapi.json").json()["paths"]
    assert {"get", "post"} <= set(paths["/prometheus/api/v1/query_range"])


def test_a_known_small_request_runs_on_the_loop(client: _Client) -> None:
    placement = _api(client).placement
    params = {**RANGE, "query": "up{job='j1'}"}
    before = placement.inline_runs, placement.pool_runs
    first = client.get("/prometheus/api/v1/query_range", params=params)
    assert (placement.inline_runs, placement.pool_runs) == (before[0], before[1] + 1)  # unknown: the pool
    # a refresh is the same request; the first run's cost held the parse, the second's not
    for shift in (10, 20):
        moved = {**params, "start": str(NOW_S - 600 - shift), "end": str(NOW_S - shift)}
        assert client.get("/prometheus/api/v1/query_range", params=moved).content.startswith(
            b'{"status":"success"'
        )
    assert placement.inline_runs > before[0] and first.status_code == 200  # the last one at least
    metrics = client.get("/metrics").text
    assert f"artimon_query_inline_runs_total {float(placement.inline_runs)}" in metrics


def test_a_request_that_failed_in_the_pool_runs_on_the_loop_next_time(client: _Client) -> None:
    placement = _api(client).placement
    params = {**RANGE, "query": 'label_replace(up, "job", "$1", "instance", "(.*")'}  # a bad regex
    answers, runs = [], []
    for _ in range(3):  # the first run's cost holds the parse and the regex's: the third is cheap
        before = placement.pool_runs
        answers.append(client.get("/prometheus/api/v1/query_range", params=params))
        runs.append(placement.pool_runs - before)
    assert runs[0] == 1 and runs[-1] == 0  # the pool (unknown), then on the loop (known cheap)
    assert {a.status_code for a in answers} == {422} and len({a.content for a in answers}) == 1


def test_a_known_small_get_is_answered_as_it_arrives_with_the_same_bytes() -> None:
    app = create_app(LocalClient(_store()))
    answered_now: list[bool] = []  # the protocol's answers at once (bookkeeper/ground/immediate.py)
    answer_now = app.answer_now  # type: ignore[attr-defined]

    def counted(scope: dict[str, Any]) -> Any:
        answer = answer_now(scope)
        answered_now.append(answer is not None)
        return answer

    app.answer_now = counted  # type: ignore[attr-defined]
    with _served(app) as served:
        answers = []
        while len(answers) < 5 and True not in answered_now:  # the first runs cold (the pool)
            answers.append(served.get("/prometheus/api/v1/query_range", params=RANGE))
        answers += [served.get("/prometheus/api/v1/query_range", params=RANGE) for _ in range(2)]
    assert answered_now[0] is False and answered_now[-3:] == [True] * 3
    assert len({a.content for a in answers}) == 1 and answers[0].json()["status"] == "success"
    heads = [{k: v for k, v in a.headers.items() if k != "date"} for a in answers]
    assert heads == [heads[0]] * len(answers) and all("date" in a.headers for a in answers)


class _Remote:
    """A source that is not in this process's memory (as a sharded client's)."""

    def __init__(self, store: Store) -> None:
        self.local = LocalClient(store)

    def fetch(self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto") -> FetchResult:
        return self.local.fetch(selector, start_ms, end_ms, resolution)

    def series(self, selector: str) -> list[str]:
        return self.local.series(selector)

    def label_names(self) -> list[str]:
        return self.local.label_names()

    def label_values(self, label: str) -> list[str]:
        return self.local.label_values(label)

    def strings(self, selector: str) -> dict[str, tuple[int, str]]:
        return self.local.strings(selector)


def test_a_remote_source_always_runs_in_the_pool() -> None:
    with _served(create_app(_Remote(_store()))) as remote:
        for _ in range(3):
            assert remote.get("/prometheus/api/v1/query_range", params=RANGE).status_code == 200
        placement = _api(remote).placement
        assert (placement.inline_runs, placement.pool_runs) == (0, 3)


def _context(budget: MemoryBudget) -> ApiContext:
    app = create_app(LocalClient(_store()), limits=Limits(timeout_s=10), budget=budget)
    api: ApiContext = app.state.api
    return api


def test_past_its_leash_an_inline_run_is_given_up_and_run_in_the_pool() -> None:
    api = _context(MemoryBudget())
    ran: list[Any] = []

    def work(context: ApiContext, budget: QueryBudget) -> str:
        ran.append((budget.wait, (context.limits or Limits()).timeout_s))
        if budget.wait:
            return "pooled"
        deadline = time.monotonic() + INLINE_LEASH_S
        while time.monotonic() < deadline:  # the work of a query that outgrew its last cost
            pass
        raise QueryLimitError("query timed out in expression evaluation")

    placement = api.placement
    assert asyncio.run(placement.run(api, "key", work))[0] == "pooled"  # unknown: the pool, measured
    result, budget = asyncio.run(placement.run(api, "key", work))
    budget.close()
    assert result == "pooled" and placement.given_up == 1
    assert ran == [(True, 10), (False, INLINE_LEASH_S), (True, 10)]
    cost = placement.cost("key")
    assert cost is not None and cost < INLINE_CPU_S  # measured again by its run in the pool


def test_an_inline_run_never_waits_for_memory() -> None:
    pool = MemoryBudget(max_bytes=10_000, wait_s=0)
    api = _context(pool)

    def work(context: ApiContext, budget: QueryBudget) -> str:
        budget.need(10 if budget.wait and not work.ran else 2000, "the answer")  # type: ignore[attr-defined]
        work.ran = True  # type: ignore[attr-defined]
        return "done"

    work.ran = False  # type: ignore[attr-defined]
    placement = api.placement
    asyncio.run(placement.run(api, "key", work))[1].close()  # measured small in the pool
    pool.acquire(9_000, "another query")
    with pytest.raises(QueryBusyError):  # inline: refused at once, then the pool's wait refuses
        asyncio.run(placement.run(api, "key", work))
    pool.release(9_000)
    assert (placement.given_up, pool.waits, pool.refusals, pool.in_use) == (1, 1, 1, 0)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "=", "&", "+", "%", "%2", "%2B", "%28", "%e9", "%C3%A9", "é", "~", " "]))
)
def test_the_query_string_reads_as_parse_qsl_reads_it(parts: list[str]) -> None:
    text = "".join(parts)
    for raw in (text.encode("utf-8"), text.encode("latin-1", "replace")):
        assert query_params(raw) == parse_qsl(raw.decode("latin-1"), keep_blank_values=True)
