"""The HTTP API on a real uvicorn server, its Python client, and schemathesis against the
published OpenAPI."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from bookkeeper.ground import BackgroundServer
from query_dsl import Client, Limits, Matrix, QueryError, QueryLimitError, QuerySyntaxError
from query_dsl.http import create_app
from vhms import LocalClient
from vhms.server import Store

MINUTE = 60_000
NOW = int(time.time() * 1000) // MINUTE * MINUTE


def filled_store() -> Store:
    store = Store(max_series_per_query=50)
    keys = [f"http.requests{{host=h{h},method={m}}}" for h in range(3) for m in ("GET", "PUT")]
    for minute in range(20):
        store.ingest(keys, np.arange(6) + minute * 6.0, np.full(6, NOW - (19 - minute) * MINUTE))
    store.ingest([f"wide{{i={i}}}" for i in range(60)], np.ones(60), np.full(60, NOW))
    return store


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    app = create_app(LocalClient(filled_store()), limits=Limits(max_points=5000, timeout_s=5))
    srv = BackgroundServer(app, "127.0.0.1", 0, name="test-query-api")
    srv.start()
    yield srv
    srv.stop()


def test_query_json_csv_and_scalar(server: BackgroundServer) -> None:
    query = 'fetch("http.requests{method=GET}", last=5m) | map(rate, 2m)'
    body = httpx.post(
        f"{server.url}/api/v1/query", json={"query": query, "end": NOW + MINUTE}, timeout=10
    ).json()
    assert len(body["series"]) == 3 and body["step_ms"] == MINUTE
    assert (
        body["series"][0]["labels"]["method"] == "GET" and body["series"][0]["values"][0] is None
    )  # NaN as null
    assert body["series"][0]["values"][-1] == pytest.approx(0.1)
    csv = httpx.post(
        f"{server.url}/api/v1/query?format=csv", json={"query": query, "end": NOW + MINUTE}, timeout=10
    )
    assert csv.headers["content-type"].startswith("text/csv")
    lines = csv.text.strip().splitlines()
    assert lines[0] == "name,host,method,timestamp_ms,value" and len(lines) == 1 + 3 * 5
    assert (
        httpx.post(f"{server.url}/api/v1/query", json={"query": "2 * 21"}, timeout=10).json()["scalar"]
        == 42.0
    )


def test_infinities_answer_null_like_nan(server: BackgroundServer) -> None:
    body = httpx.post(
        f"{server.url}/api/v1/query",
        json={"query": 'fetch("http.requests{host=h0}", last=2m) / 0 * -1', "end": NOW + MINUTE},
        timeout=10,
    ).json()
    assert [s["values"] for s in body["series"]] == [[None, None], [None, None]]
    assert sorted(s["labels"]["method"] for s in body["series"]) == ["GET", "PUT"]
    scalar = httpx.post(f"{server.url}/api/v1/query", json={"query": "1 / 0"}, timeout=10).json()
    assert scalar["scalar"] is None and scalar["took_ms"] >= 0


def test_series_labels_and_values(server: BackgroundServer) -> None:
    assert (
        len(
            httpx.get(f"{server.url}/api/v1/series", params={"match": "http.requests"}, timeout=10).json()[
                "series"
            ]
        )
        == 6
    )
    assert httpx.get(f"{server.url}/api/v1/labels", timeout=10).json()["labels"] == ["host", "i", "method"]
    assert httpx.get(f"{server.url}/api/v1/label/method/values", timeout=10).json()["values"] == [
        "GET",
        "PUT",
    ]


def test_an_empty_answer_says_why(server: BackgroundServer) -> None:
    def ask(query: str) -> dict:  # as of the store's data, however long after it the test runs
        body = {"query": query, "end": NOW + MINUTE}
        return httpx.post(f"{server.url}/api/v1/query", json=body, timeout=10).json()

    assert ask('fetch("http.requests", last=10m) | map(rate, 5m)')["warnings"] == []
    one_bucket = ask('fetch("http.requests", last=10m) | map(rate, 1m)')
    assert all(v is None for s in one_bucket["series"] for v in s["values"])
    (warning,) = one_bucket["warnings"]
    assert "map(rate, 1m) over 1m buckets" in warning and "at least 2m" in warning
    assert ask('fetch("nothing.here")')["warnings"] == ["fetch('nothing.here') matches no series"]
    assert ask("1 + 1")["warnings"] == []
    empty = ask('fetch("http.requests", start=0, end=60000)')
    assert empty["warnings"] == [
        "every value of the answer is empty (no sample in the range, or none left by the query)"
    ]
    with Client(server.url) as client:
        client.query('fetch("http.requests", last=10m) | map(increase, 1m)')
        assert len(client.warnings) == 1 and "increase needs two" in client.warnings[0]


def test_string_variables_answer_their_text() -> None:
    """A STRING variable is not a number: a query that fetches it answers its last text,
    and so do /api/v1/strings, the client and the CLI's table."""
    store = filled_store()
    store.ingest_strings(
        ["app.version{host=h1}", "app.version{host=h2}"], ["1.0.0", "1.1.0"], np.array([NOW, NOW])
    )
    server = BackgroundServer(create_app(LocalClient(store)), "127.0.0.1", 0)
    server.start()
    try:
        body = httpx.post(
            f"{server.url}/api/v1/query", json={"query": 'fetch("app.version")'}, timeout=10
        ).json()
        assert body["strings"] == [
            {"name": "app.version", "labels": {"host": "h1"}, "value": "1.0.0", "timestamp": NOW},
            {"name": "app.version", "labels": {"host": "h2"}, "value": "1.1.0", "timestamp": NOW},
        ]
        assert body["warnings"] == []  # the answer has its values: the text
        direct = httpx.get(
            f"{server.url}/api/v1/strings", params={"match": "app.version{host=h2}"}, timeout=10
        )
        assert [s["value"] for s in direct.json()["strings"]] == ["1.1.0"]
        numbers = httpx.post(
            f"{server.url}/api/v1/query", json={"query": 'fetch("http.requests")'}, timeout=10
        )
        assert numbers.json()["strings"] == []
        with Client(server.url) as client:
            client.query('fetch("app.version{host=h1}")')
            assert [s["value"] for s in client.strings] == ["1.0.0"]
        table = subprocess.run(
            [sys.executable, "-m", "artimon", "query", "--url", server.url, 'fetch("app.version")'],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert table.returncode == 0, table.stderr
        assert table.stdout.splitlines()[0].split() == ["host", "value", "sampled"]
        assert table.stdout.splitlines()[2].split()[:2] == ["h2", "1.1.0"]
    finally:
        server.stop()


def test_series_takes_prometheus_match_and_refuses_what_it_does_not_know(server: BackgroundServer) -> None:
    """``match[]=x`` is Prometheus's form: it selects, it does not widen the answer to every
    series; an unknown parameter and no selector at all are errors, not everything."""
    series = f"{server.url}/api/v1/series"
    assert httpx.get(series, params={"match[]": "x"}, timeout=10).json() == {"series": []}
    both = httpx.get(
        series, params=[("match[]", "http.requests{method=GET}"), ("match[]", "nope")], timeout=10
    )
    assert len(both.json()["series"]) == 3
    assert len(httpx.get(series, params={"match": "{method=PUT}"}, timeout=10).json()["series"]) == 3
    for params in ({"matches": "x"}, {}, {"match": "x", "limit": "5"}):
        answer = httpx.get(series, params=params, timeout=10)
        assert answer.status_code == 400, (params, answer.text)
    wrong = httpx.get(series, params={"matches": "x"}, timeout=10).json()["error"]["message"]
    assert "unknown parameter matches" in wrong
    assert httpx.get(f"{server.url}/api/v1/labels", params={"match[]": "x"}, timeout=10).status_code == 400


@pytest.mark.parametrize(
    ("body", "status", "kind"),
    [
        ({"query": "fetch("}, 400, "QuerySyntaxError"),
        ({"query": 'fetch("x", last=2)'}, 400, "QueryTypeError"),
        ({"query": 'fetch("http.requests", last=1d, resolution=60s)'}, 413, "QueryLimitError"),
        ({"query": 'fetch("wide")'}, 413, "QueryLimitError"),  # the store's own series limit
        ({"query": "x" * 20_000}, 422, None),
        ({"nope": 1}, 422, None),
    ],
)
def test_errors_are_clear_and_the_server_stays_up(
    server: BackgroundServer, body: dict, status: int, kind: str | None
) -> None:
    response = httpx.post(f"{server.url}/api/v1/query", json=body, timeout=10)
    assert response.status_code == status, response.text
    if kind:
        assert response.json()["error"]["kind"] == kind
    assert httpx.get(f"{server.url}/api/v1/labels", timeout=10).status_code == 200


def test_garbage_bodies(server: BackgroundServer) -> None:
    for raw in (b"\xff\xfe garbage", b"{", b"[]", b'{"query": 12}', b"\xa0\x9b not utf-8"):
        for content_type in ("application/json", "text/plain", None):
            headers = {"content-type": content_type} if content_type else {}
            response = httpx.post(f"{server.url}/api/v1/query", content=raw, headers=headers, timeout=10)
            assert response.status_code in (400, 422), (raw, content_type, response.text)
            assert response.json()["error"]["message"]
    response = httpx.get(f"{server.url}/api/v1/nope", timeout=10)
    assert response.status_code == 404 and response.json()["error"]["kind"] == "HTTPException"


def test_syntax_errors_carry_line_and_column(server: BackgroundServer) -> None:
    error = httpx.post(
        f"{server.url}/api/v1/query", json={"query": 'fetch("x")\n | map(rate 5m)'}, timeout=10
    ).json()["error"]
    assert (error["line"], error["column"]) == (2, 13)


def test_python_client(server: BackgroundServer) -> None:
    with Client(server.url) as client:
        result = client.query(
            'fetch("http.requests", last=3m) | reduce(sum, by=[method])', end_ms=NOW + MINUTE
        )
        assert isinstance(result, Matrix) and sorted(lab["method"] for lab in result.labels) == ["GET", "PUT"]
        frame = client.query_frame('fetch("http.requests{host=h0}", last=2m)', end_ms=NOW + MINUTE)
        assert frame.shape == (2, 2) and frame.index.tz is not None
        assert client.query("1 / 4") == 0.25
        assert client.labels() == ["host", "i", "method"]
        with pytest.raises(QuerySyntaxError) as info:
            client.query("fetch(")
        assert info.value.line == 1
        with pytest.raises(QueryLimitError):
            client.query('fetch("http.requests", last=1d, resolution=60s)')
        with pytest.raises(QueryError):
            client.query("nope()")


def test_bearer_token() -> None:
    app = create_app(LocalClient(filled_store()), token="s3cret")
    srv = BackgroundServer(app, "127.0.0.1", 0)
    srv.start()
    try:
        assert httpx.get(f"{srv.url}/api/v1/labels", timeout=10).status_code == 401
        assert (
            httpx.get(
                f"{srv.url}/api/v1/labels", headers={"Authorization": "Bearer wrong"}, timeout=10
            ).status_code
            == 401
        )
        with Client(srv.url, token="s3cret") as client:
            assert client.labels() == ["host", "i", "method"]
    finally:
        srv.stop()


def test_openapi_contract(server: BackgroundServer) -> None:
    """schemathesis generates requests from the published OpenAPI and checks every answer
    against it: no server error, documented status codes, content types and bodies (its
    pytest plugin does not run on this pytest, so hypothesis drives the operations here)."""
    api = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    # the Prometheus API under /prometheus has its own, over data (tests/query_dsl/promql)
    operations = [
        op
        for op in (result.ok() for result in api.get_all_operations())
        if not op.path.startswith("/prometheus")
    ]
    assert {op.path for op in operations} >= {"/api/v1/query", "/api/v1/series", "/api/v1/labels"}
    for operation in operations:

        @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case: schemathesis.Case) -> None:
            # a query can be schema-valid and still wrong: a 400 for it is the contract
            case.call_and_validate(excluded_checks=[schemathesis.checks.positive_data_acceptance])

        check()


def test_series_listing_errors(server: BackgroundServer) -> None:
    too_many = httpx.get(f"{server.url}/api/v1/series", params={"match": "wide"}, timeout=10)
    assert too_many.status_code == 413 and too_many.json()["error"]["kind"] == "QueryLimitError"
    bad = httpx.get(f"{server.url}/api/v1/series", params={"match": "x{oops"}, timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["kind"] == "SelectorError"
