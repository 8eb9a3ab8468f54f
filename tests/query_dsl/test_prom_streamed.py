"""A wide answer of Prometheus's API is sent a block at a time as it is written
(query_dsl/http/prom_fast.py, prom_api.py): its bytes are the whole answer's, on the fast path
and on FastAPI's routes, with its Content-Length known before it is written; a client that goes
away mid-answer stops the writing, and the query's memory goes back to the budget."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from starlette.types import Receive

from bookkeeper.ground import BackgroundServer
from query_dsl import MemoryBudget, create_app
from query_dsl.http import prom_api, prom_fast
from query_dsl.http.prom_api import prometheus_router
from query_dsl.text_rows import RowsText
from vhms import LocalClient
from vhms.server import Store

NOW_S = int(time.time()) // 60 * 60
SERIES = 6000  # past the small writer's cells: the answers are laid out, 290 and 760 KB
QUERY = {"query": "wide / on(i) wide", "time": str(NOW_S)}
RANGE = {"query": "wide", "start": str(NOW_S - 120), "end": str(NOW_S), "step": "60"}


@pytest.fixture(scope="module")
def store() -> Store:
    store = Store("60s:10")
    keys = [f"wide{{i={i},host=h{i % 7}}}" for i in range(SERIES)]
    for minute in range(4):
        store.ingest(
            keys, np.arange(SERIES) * 0.5 + minute, np.full(SERIES, (NOW_S - 180 + minute * 60) * 1000)
        )
    return store


def _fastapi_only(app: FastAPI) -> FastAPI:
    """Prometheus's routes served by FastAPI's routing alone (no fast path in front)."""
    plain = FastAPI()
    plain.state.api = app.state.api
    plain.include_router(prometheus_router)
    return plain


def _answers(app: FastAPI) -> list[httpx.Response]:
    server = BackgroundServer(app, name="test-prom-streamed")
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            return [
                client.get("/prometheus/api/v1/query", params=QUERY),
                client.get("/prometheus/api/v1/query_range", params=RANGE),
            ]
    finally:
        server.stop()


def test_a_streamed_answer_is_the_whole_answer(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    app = create_app(LocalClient(store))
    whole = _answers(app)
    assert all(len(answer.content) > 250_000 for answer in whole)
    monkeypatch.setattr(prom_api, "STREAM_BYTES", 10_000)  # 30-80 blocks an answer
    for served in (app, _fastapi_only(app)):
        streamed = _answers(served)
        for one, other in zip(streamed, whole, strict=True):
            assert one.status_code == 200 and one.content == other.content
            assert one.headers["content-length"] == str(len(other.content))
            assert "transfer-encoding" not in one.headers
    assert app.state.api.budget.in_use == 0


def test_a_client_that_goes_away_stops_the_writing(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prom_api, "STREAM_BYTES", 10_000)
    budget = MemoryBudget()
    app = create_app(LocalClient(store), budget=budget)
    proceed, noticed = threading.Event(), threading.Event()
    written: list[int] = []
    closed = threading.Event()

    def blocks(body: RowsText) -> Iterator[memoryview]:  # the first block, then one when the test says
        try:
            for number, piece in enumerate(body.blocks(prom_api.STREAM_BYTES)):
                if number:
                    assert proceed.wait(30)
                written.append(len(piece))
                yield piece
        finally:
            closed.set()

    disconnect = prom_fast._disconnect

    async def watched(receive: Receive) -> None:
        await disconnect(receive)
        noticed.set()

    monkeypatch.setattr(prom_fast, "blocks", blocks)
    monkeypatch.setattr(prom_fast, "_disconnect", watched)
    server = BackgroundServer(app, name="test-prom-streamed")
    server.start()
    try:
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as client:
            path = "/prometheus/api/v1/query?" + httpx.QueryParams(QUERY).__str__()
            client.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            received = b""
            while b'"result":[' not in received:  # the first block has come: the second is asked for
                received += client.recv(65536)
            assert received.startswith(b"HTTP/1.1 200")
        assert noticed.wait(30)  # the server saw the client go
        proceed.set()
        assert closed.wait(30)
        deadline = time.monotonic() + 30
        while budget.in_use and time.monotonic() < deadline:
            time.sleep(0.01)
        assert budget.in_use == 0 and len(written) == 2  # of about 30
    finally:
        proceed.set()
        server.stop()
