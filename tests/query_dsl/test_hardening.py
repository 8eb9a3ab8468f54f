"""Attacks on the HTTP query API, on a real uvicorn server in this process: ReDoS regexes
(a corpus and generated ones) against a store with many label values, oversized bodies
(declared and chunked), deeply nested and very long expressions, absurd durations and
times. Each is answered in time, with a 4xx where the input is at fault; the server's RSS
stays bounded and it keeps answering other requests meanwhile and afterwards."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bookkeeper.ground import BackgroundServer
from query_dsl import Limits
from query_dsl.http.api import create_app
from query_dsl.http.body_limit import MAX_BODY_BYTES
from query_dsl.sources import ShardedSource
from vhms import LocalClient
from vhms.server import Store, VhmsService

MINUTE = 60_000
NOW = int(time.time() * 1000) // MINUTE * MINUTE
VALUES = 20_000
BOUND_S = 5.0  # one attack's answer: RE2 takes milliseconds; generous for a loaded 2-core machine
SERVING_S = 2.0  # the slowest answer to a plain request while attacks run
RSS_GROWTH_MB = 64.0


def rss_mb() -> float:
    """The resident memory of this process, the server's (it runs in a thread of it)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def selector_value(regex: str) -> str:
    """A regex as a quoted selector value."""
    return '"' + regex.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dsl_string(text: str) -> str:
    """Text as a string of the query language."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def attacks(regex: str) -> list[str]:
    """Queries that run ``regex``: on a label in VHMS, on names (a name regex ends at the
    first brace), and in the query layer's filter; each counted, not listed (thousands of
    series of JSON would time the answer, not the regex)."""
    label = f"{{v~{selector_value(regex)}}}"
    queries = [f"fetch({dsl_string(label)}, last=10m)"]
    if "{" not in regex:
        queries.append(f"fetch({dsl_string('~' + regex)}, last=10m)")
    queries.append(f'fetch("redos", last=10m) | filter({dsl_string(f"{{v!~{selector_value(regex)}}}")})')
    return [f"{query} | reduce(count)" for query in queries]


@pytest.fixture(scope="module")
def server(redos_label_values: Callable[[int], list[str]]) -> Iterator[BackgroundServer]:
    store = Store(max_series=VALUES + 100, max_series_per_query=VALUES + 100, max_select_s=2.0)
    keys = [f"redos{{v={value}}}" for value in redos_label_values(VALUES)]
    keys += [f"{'a' * (20 + i % 10)}{'x' * (i % 7)}{{i={i}}}" for i in range(50)]  # names to backtrack on
    store.ingest(keys, np.ones(len(keys)), np.full(len(keys), NOW))
    app = create_app(LocalClient(store), limits=Limits(timeout_s=3.0))
    srv = BackgroundServer(app, "127.0.0.1", 0, name="test-hardening-api")
    srv.start()
    yield srv
    srv.stop()


def post(server: BackgroundServer, query: str) -> tuple[int, dict[str, Any], float]:
    started = time.perf_counter()
    response = httpx.post(
        f"{server.url}/api/v1/query", json={"query": query, "end": NOW + MINUTE}, timeout=BOUND_S * 4
    )
    return response.status_code, response.json(), time.perf_counter() - started


class Watch:
    """Asks the server a plain question every 50 ms from a thread of its own, recording how
    long each answer took: whether it keeps serving while something else runs."""

    def __init__(self, server: BackgroundServer) -> None:
        self.url = f"{server.url}/api/v1/labels"
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watch")

    def _run(self) -> None:
        with httpx.Client(timeout=BOUND_S * 4) as client:
            while True:  # one question at least, however short the watch
                started = time.perf_counter()
                try:
                    status = client.get(self.url).status_code
                    self.latencies.append(time.perf_counter() - started)
                    if status != 200:
                        self.failures.append(f"status {status}")
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))
                if self._stop.wait(0.05):
                    return

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def check(self) -> None:
        assert self.latencies, "the server answered nothing meanwhile"
        assert not self.failures, self.failures[:3]
        assert max(self.latencies) < SERVING_S, f"a plain request waited {max(self.latencies):.1f} s"


def still_serves(server: BackgroundServer) -> None:
    status, body, _ = post(server, 'fetch("redos{v=aaaaaaaaaaaaaaaaaaaaaaaa!0}", last=10m)')
    assert status == 200 and len(body["series"]) == 1, body
    assert httpx.get(f"{server.url}/api/v1/labels", timeout=10).json()["labels"] == ["i", "v"]


# -- regexes -----------------------------------------------------------------------------


def test_redos_corpus_answers_in_time_while_the_server_keeps_serving(
    server: BackgroundServer, redos_corpus: tuple[str, ...]
) -> None:
    queries = [query for regex in redos_corpus for query in attacks(regex)]
    with Watch(server) as watch, ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda query: post(server, query), queries))
    for query, (status, body, took) in zip(queries, answers, strict=True):
        assert status in (200, 400, 413), (query, body)
        assert took < BOUND_S, f"{query} took {took:.1f} s"
    watch.check()
    assert sum(status == 200 for status, _, _ in answers) >= len(queries) // 2  # most simply run
    still_serves(server)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_generated_regexes_answer_in_time(
    server: BackgroundServer, redos_regexes: st.SearchStrategy[str], data: st.DataObject
) -> None:
    for query in attacks(data.draw(redos_regexes)):
        status, body, took = post(server, query)
        assert status in (200, 400, 413) and took < BOUND_S, (query, status, body, took)


def test_what_re2_cannot_do_is_a_400_naming_the_regex(server: BackgroundServer) -> None:
    for regex, reason in [("(a)\\1", "invalid escape sequence"), ("a(?=b)", "invalid perl operator")]:
        status, body, _ = post(server, f"fetch({dsl_string(f'{{v~{selector_value(regex)}}}')}, last=10m)")
        assert status == 400 and body["error"]["kind"] == "QueryError", body
        assert repr(regex) in body["error"]["message"] and reason in body["error"]["message"]
        status, body, _ = post(
            server, f'fetch("redos", last=10m) | filter({dsl_string(f"{{v~{selector_value(regex)}}}")})'
        )
        assert status == 400 and reason in body["error"]["message"], body
    listing = httpx.get(f"{server.url}/api/v1/series", params={"match": '{v~"a(?<!b)"}'}, timeout=10)
    assert listing.status_code == 400 and listing.json()["error"]["kind"] == "SelectorError"


# -- bodies ------------------------------------------------------------------------------


def send(
    server: BackgroundServer, head: str, chunks: Iterable[bytes]
) -> tuple[int, dict[str, str], bytes, int]:
    """Send a request's head, then its body's chunks until the server answers (or cuts the
    connection); returns the status, headers and body of the answer and the bytes sent."""
    sent = 0
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(head.encode())
        try:
            for chunk in chunks:
                if select.select([sock], [], [], 0)[0]:  # answered: stop sending
                    break
                sock.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = b""
        while True:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                break
            if not data:  # the server closed the connection: answered whole
                break
            answer += data
    head_text, _, body = answer.partition(b"\r\n\r\n")
    lines = head_text.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body, sent


def body_of(total: int, chunk: int = 64 * 1024, chunked: bool = False) -> Iterator[bytes]:
    """``total`` bytes of a JSON body that never ends its string, ``chunk`` at a time."""
    yield (b'{"query": "' if not chunked else b'b\r\n{"query": "\r\n')
    payload = b"1+" * (chunk // 2)
    for _ in range(total // chunk):
        yield payload if not chunked else f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


def head(extra: str) -> str:
    return f"POST /api/v1/query HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n{extra}\r\n"


def test_oversized_bodies_are_refused_before_they_are_read(server: BackgroundServer) -> None:
    huge = 300 * 1024 * 1024
    before = rss_mb()
    with Watch(server) as watch:
        declared = send(server, head(f"Content-Length: {huge}\r\n"), body_of(huge))
        streamed = send(server, head("Transfer-Encoding: chunked\r\n"), body_of(huge, chunked=True))
    for status, headers, body, sent in (declared, streamed):
        assert status == 413 and headers.get("connection") == "close", (status, headers, body)
        assert b"at most 131,072 bytes" in body and sent < huge // 10, sent
    assert b"declares 314,572,800 bytes" in declared[2] and b"while it was read" in streamed[2]
    just_over = httpx.post(f"{server.url}/api/v1/query", json={"query": "1" * MAX_BODY_BYTES}, timeout=10)
    assert just_over.status_code == 413 and just_over.json()["error"]["kind"] == "HTTPException"
    too_long = httpx.post(f"{server.url}/api/v1/query", json={"query": "1" * 10_001}, timeout=10)
    assert too_long.status_code == 422  # under the body limit: the query's own limit answers
    assert rss_mb() - before < RSS_GROWTH_MB, f"RSS grew {rss_mb() - before:.0f} MB"
    watch.check()
    still_serves(server)


# -- expressions, durations, times -------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "status", "kind"),
    [
        ("+".join(["1"] * 3000), 400, "QuerySyntaxError"),  # a RecursionError, a 500, before
        ("^".join(["2"] * 3000), 400, "QuerySyntaxError"),
        ("-" * 9000 + "1", 400, "QuerySyntaxError"),
        ('fetch("redos", last=1m)' + "|top(1)" * 1200, 400, "QuerySyntaxError"),
        ("(" * 4000 + "1" + ")" * 4000, 200, None),  # long but shallow: parentheses nest nothing
        ("x" * 10_001, 422, "RequestValidationError"),
        ('fetch("redos", last=100000000000w)', 400, "QuerySyntaxError"),
        ('fetch("redos", last=3000w)', 400, "QueryTypeError"),
        ('fetch("redos", start=1e999)', 400, "QueryTypeError"),
        ('fetch("redos", end=1e300)', 400, "QueryTypeError"),
        ('fetch("redos", last=10m) | map(timeshift, 1e999)', 400, "QueryTypeError"),
        ('fetch("redos", last=10m) | top(1e999)', 400, "QueryTypeError"),
    ],
)
def test_deep_long_and_absurd_queries_are_answered_and_leave_the_server_up(
    server: BackgroundServer, query: str, status: int, kind: str | None
) -> None:
    before = rss_mb()
    answer, body, took = post(server, query)
    assert answer == status and took < BOUND_S, (answer, body)
    if kind is not None:
        assert body["error"]["kind"] == kind and body["error"]["message"], body
    assert rss_mb() - before < RSS_GROWTH_MB
    still_serves(server)


def test_an_absurd_range_through_the_shards_is_a_400_not_a_500() -> None:
    """Over Thrift the range travels as int64 milliseconds: 100000000000w once made the
    client's encoding fail with an OverflowError (a 500)."""
    store = Store()
    store.ingest(["load{dc=east}"], np.ones(1), np.full(1, NOW))
    service = VhmsService(store, http_port=None)
    service.start(register=False)
    source = ShardedSource(servers=[(service.host, service.port)])
    srv = BackgroundServer(create_app(source), "127.0.0.1", 0, name="test-hardening-shards")
    srv.start()
    try:
        for query, kind in [
            ('fetch("load", last=100000000000w)', "QuerySyntaxError"),
            ('fetch("load", start=1e300, end=2e300)', "QueryTypeError"),
            ('fetch("load", start=-9e18)', "QueryTypeError"),
            (
                f"fetch({dsl_string('{dc~' + selector_value('(a)' + chr(92) + '1') + '}')}, last=10m)",
                "QueryError",
            ),
        ]:
            response = httpx.post(f"{srv.url}/api/v1/query", json={"query": query}, timeout=10)
            assert response.status_code == 400 and response.json()["error"]["kind"] == kind, response.text
        fine = httpx.post(
            f"{srv.url}/api/v1/query",
            json={"query": 'fetch("load", last=10m)', "end": NOW + MINUTE},
            timeout=10,
        )
        assert fine.status_code == 200 and len(fine.json()["series"]) == 1
    finally:
        srv.stop()
        source.close()
        service.stop()
