"""Bad input to PromQL and Prometheus's API: random text gives PromQLSyntaxError and nothing
else; absurd ranges, steps and times, and regexes that would backtrack, give the documented
errors (docs/promql.md) and the server stays up; schemathesis over the API's OpenAPI."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bookkeeper.ground import BackgroundServer
from query_dsl.promql import PromQLSyntaxError, parse

_TOKENS = [
    "sum",
    "rate",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "5m",
    ":",
    "1m",
    "x",
    "up",
    ",",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "bool",
    "offset",
    "@",
    "+",
    "-",
    "*",
    "/",
    "^",
    "==",
    ">",
    "and",
    "or",
    '"a"',
    "'b'",
    "`c`",
    "=~",
    "!~",
    "!=",
    "=",
    "1",
    "0x1f",
    "1e3",
    "Inf",
    "NaN",
    "topk",
    "start()",
    " ",
    "\n",
    "#",
    "label_replace",
    "histogram_quantile",
    "le",
    "__name__",
    "é",
    "\\",
    '"\\x"',
]


def _parses_or_refuses(text: str) -> None:
    try:
        parse(text)
    except PromQLSyntaxError as exc:
        assert exc.line >= 1 and exc.column >= 1, (text, exc)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=200))
def test_random_text_is_a_syntax_error_or_parses(text: str) -> None:
    _parses_or_refuses(text)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), max_size=30).map("".join))
def test_random_token_soup_is_a_syntax_error_or_parses(text: str) -> None:
    _parses_or_refuses(text)


def test_errors_give_line_and_column() -> None:
    with pytest.raises(PromQLSyntaxError) as caught:
        parse("sum(rate(x[5m]))\n  + on(job) ]")
    assert (caught.value.line, caught.value.column) == (2, 13)
    with pytest.raises(PromQLSyntaxError, match="expected type range vector"):
        parse("rate(x)")
    with pytest.raises(PromQLSyntaxError, match="nests more than"):
        parse("-" * 300 + "1")
    with pytest.raises(PromQLSyntaxError, match="at most 10000 characters"):
        parse("x" * 10_001)


def test_a_dotted_name_gets_its_quoted_form_suggested() -> None:
    with pytest.raises(PromQLSyntaxError) as caught:
        parse('rate(http.requests{method="GET"}[1m])')
    assert str(caught.value) == (
        "unexpected character '.' at line 1, column 10: a name with dots is written quoted, "
        '{"http.requests"} (or {"http.requests", label="value"})'
    )
    with pytest.raises(PromQLSyntaxError) as caught:
        parse("sum(x) . y")
    assert str(caught.value) == "unexpected character '.' at line 1, column 8"


@pytest.fixture(scope="module")
def base(artimon: BackgroundServer) -> str:
    return f"{artimon.url}/prometheus/api/v1"


@pytest.mark.parametrize(
    ("path", "params", "status", "kind", "words"),
    [
        ("query_range", {"query": "up", "start": 0, "end": 1e9, "step": 1}, 400, "bad_data", "11,000 points"),
        ("query_range", {"query": "up", "start": 10, "end": 0, "step": 1}, 400, "bad_data", "before start"),
        ("query_range", {"query": "up", "start": 0, "end": 10, "step": 0}, 400, "bad_data", "step"),
        ("query_range", {"query": "up", "start": 0, "end": 10, "step": "NaN"}, 400, "bad_data", "step"),
        ("query", {"query": "up", "time": "1e400"}, 400, "bad_data", "time"),
        ("query", {"query": "up", "time": "yesterday"}, 400, "bad_data", "time"),
        ("query", {"query": "rate(up[1000y])"}, 400, "bad_data", "100 years"),
        ("query", {"query": "max_over_time(up[3650d:1ms])"}, 422, "execution", "subquery"),
        ("query", {"query": "up offset 99y"}, 200, None, ""),
        ("query", {"query": "up", "time": "9223372036854775"}, 400, "bad_data", "time"),
        ("query", {"query": "up @ 9000000000000"}, 200, None, ""),
        ("query", {"query": "up @ 1e300"}, 400, "bad_data", "beyond"),
        ("query", {"query": "topk(1e300, up)"}, 422, "execution", "overflows int64"),
        ("query", {"query": 'up{job=~"(a|aa)*\\\\1"}'}, 422, "execution", "backreference"),
        (
            "query",
            {"query": 'label_replace(up, "x", "$1", "job", "(?=a)")'},
            422,
            "execution",
            "regular expression",
        ),
        ("query", {"query": "up", "timeout": "-1s"}, 400, "bad_data", "timeout"),
        ("query", {"query": ""}, 400, "bad_data", "query"),
        ("series", {}, 400, "bad_data", "match[]"),
        ("series", {"match[]": "sum(up)"}, 400, "bad_data", "series selector"),
    ],
)
def test_absurd_requests_get_documented_errors(
    base: str, path: str, params: dict[str, Any], status: int, kind: str | None, words: str
) -> None:
    answer = httpx.get(f"{base}/{path}", params=params, timeout=30)
    body = answer.json()
    assert answer.status_code == status, body
    if kind is not None:
        assert body["status"] == "error" and body["errorType"] == kind and words in body["error"], body
    assert httpx.get(f"{base}/status/buildinfo", timeout=10).json()["status"] == "success"


def test_regex_that_backtracks_runs_in_linear_time(base: str) -> None:
    evil = "(" + "a?" * 30 + ")" + "a" * 30
    answer = httpx.get(f"{base}/query", params={"query": f'count(up{{job=~"{evil}"}})'}, timeout=10)
    assert answer.status_code == 200 and answer.json()["data"]["result"] == []


def test_post_form_and_get_agree(base: str, promql_dataset: Any) -> None:
    params = {"query": "sum by (job) (up)", "time": promql_dataset.end_s}
    got = httpx.get(f"{base}/query", params=params, timeout=10).json()
    posted = httpx.post(f"{base}/query", data=params, timeout=10).json()
    assert got == posted and len(got["data"]["result"]) == 2


@pytest.mark.slow
def test_openapi_contract_of_the_prometheus_api(artimon: BackgroundServer) -> None:
    """schemathesis generates requests from the OpenAPI of the /prometheus paths and checks
    every answer against it (no server error, documented codes and bodies)."""
    api = schemathesis.openapi.from_url(f"{artimon.url}/openapi.json")
    operations = [
        op for op in (result.ok() for result in api.get_all_operations()) if op.path.startswith("/prometheus")
    ]
    assert {op.path for op in operations} >= {"/prometheus/api/v1/query", "/prometheus/api/v1/query_range"}
    for operation in operations:

        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(excluded_checks=[schemathesis.checks.positive_data_acceptance])

        check()
