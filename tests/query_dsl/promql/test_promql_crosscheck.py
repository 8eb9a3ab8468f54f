"""The same PromQL through Prometheus's HTTP API on a real Prometheus and on Artimon, over
the same data (query_dsl.promql.dataset): same series and labels, values within 1e-9
relative, or the difference docs/promql.md documents, asserted as such."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest

from artimon.servers import PrometheusServer
from bookkeeper.ground import BackgroundServer

C = "http_requests_total"
T = "cpu_temp_celsius"
B = "request_duration_seconds_bucket"
IDLE = "idle_duration_seconds_bucket"  # rates 0: every quantile NaN

# every function, aggregation and operator of docs/promql.md, each through an instant and a
# range query
EXPRESSIONS = [
    # selectors
    C,
    f'{C}{{job="api"}}',
    f'{C}{{job!="api"}}',
    f'{C}{{instance=~"i[01]"}}',
    f'{C}{{method!~"G.*"}}',
    f'{T}{{rack=""}}',
    f'{T}{{rack!=""}}',
    f'{{__name__="{T}"}}',
    '{__name__=~"cpu_.*|up"}',
    f"{C} offset 5m",
    f"{C} offset -2m",
    "batch_last_success_timestamp_seconds",
    # range functions
    f"rate({C}[5m])",
    f"rate({C}[1m])",
    f"rate({C}[2m] offset 3m)",
    f"irate({C}[5m])",
    f"increase({C}[10m])",
    f"delta({T}[5m])",
    f"idelta({T}[5m])",
    f"deriv({T}[10m])",
    f"predict_linear({T}[10m], 600)",
    f"predict_linear({C}[5m], -60)",
    f"holt_winters({T}[10m], 0.3, 0.6)",
    "holt_winters(up[5m], 0.5, 0.1)",
    f"changes({T}[5m])",
    "changes(up[10m])",
    f"resets({C}[30m])",
    f"avg_over_time({T}[5m])",
    f"min_over_time({T}[5m])",
    f"max_over_time({T}[5m])",
    f"sum_over_time({T}[5m])",
    f"count_over_time({T}[5m])",
    f"last_over_time({T}[5m])",
    f"quantile_over_time(0.9, {T}[10m])",
    f"quantile_over_time(0, {T}[10m])",
    f"stddev_over_time({T}[10m])",
    f"stdvar_over_time({T}[10m])",
    f"present_over_time({T}[5m])",
    "absent_over_time(nonexistent[5m])",
    f"absent_over_time({T}[5m])",
    # instant functions
    f"abs({T})",
    f"ceil({T})",
    f"floor({T})",
    f"round({T})",
    f"round({T}, 5)",
    f"round({T}, 0.3)",
    f"clamp({T}, 0, 50)",
    f"clamp_max({T}, 40)",
    f"clamp_min({T}, 10)",
    f"sort({T})",
    f"sort_desc({T})",
    f"timestamp({T})",
    f"timestamp(sum({T}))",
    "time()",
    "vector(time())",
    "vector(1)",
    f"scalar(sum({T}))",
    f"scalar({T})",
    f"absent({T})",
    'absent(nonexistent{job="x", instance=~"y"})',
    f'label_replace({T}, "hostname", "host-$1", "host", "h(.*)")',
    f'label_join({C}, "where", "/", "job", "instance")',
    f'label_replace({T}, "x", "$9-${{1}}-$$-$name", "host", "h(?P<name>.)")',
    f"histogram_quantile(0.9, {B})",
    f"histogram_quantile(0.5, rate({B}[5m]))",
    f"histogram_quantile(0.99, sum by (le) (rate({B}[5m])))",
    f"histogram_quantile(1.5, {B})",
    f"sgn({T})",
    f"exp({T} / 100)",
    f"sqrt(abs({T}))",
    f"ln(abs({T}))",
    # aggregations
    f"sum({C})",
    f"sum by (job) ({C})",
    f"sum without (instance) ({C})",
    f"avg by (host) ({T})",
    f"min({T})",
    f"max by (rack) ({T})",
    f"count({T})",
    "count by (job) (up == 1)",
    f"stddev({T})",
    f"stdvar by (job) ({C})",
    f"group by (job) ({C})",
    'count by (__name__) ({job=~".+"})',  # the name grouped on is kept
    f"sum by (__name__, job) ({C})",
    f"quantile by (__name__) (0.5, {T})",
    f'count_values by (__name__) ("v", {T} > 20)',
    f"topk(2, {T})",
    f"bottomk(1, {C}) by (job)",
    f"topk by (job) (1, rate({C}[5m]))",
    f"quantile(0.5, {T})",
    f"quantile by (job) (0.9, rate({C}[5m]))",
    'count_values("value", up)',
    'count_values by (job) ("v", up)',
    f"sum(rate({C}[5m])) by (job, method)",
    # binary operators
    f"{T} + 1",
    f"2 * {T}",
    f"{T} - {T}",
    f"{T} / 3",
    f"{T} % 7",
    f"{T} ^ 2",
    f"-{T}",
    f"{T} > 30",
    f"30 < {T}",
    f"{T} >= bool 30",
    f"{T} == bool {T}",
    f"{T} != 1",
    f"{T} <= 20",
    "1 + 2 * 3 ^ 2",
    "2 ^ 3 ^ 2",
    "5 > bool 3",
    f"{C} / on(job, instance, method) {C}",
    f"rate({C}[5m]) / ignoring(method) group_left sum without (method) (rate({C}[5m]))",
    f"sum by (job, instance) ({C}) * on(job, instance) group_left up",
    f"up * on(job, instance) group_right sum by (job, instance, method) ({C})",
    f'{C} * on(job, instance) group_left(foo) label_replace(up, "foo", "bar-$1", "instance", "(.*)")',
    f"{C} and {C} > 1000",
    f"{C} and on(job) up == 0",
    f"{T} or up",
    f"up or {T}",
    f'{C} unless {C}{{method="GET"}}',
    f"{C} unless on(job) up == 0",
    f"{T} atan2 10",
    # subqueries and @
    f"max_over_time(rate({C}[1m])[10m:1m])",
    f"avg_over_time({T}[15m:2m])",
    f"rate(sum({C})[5m:30s])",
    f"min_over_time(sum by (job) ({C})[10m:])",
    f"{T} @ end()",
    f"{T} @ start()",
    f"rate({C}[5m] @ end())",
    # limits of data
    f'{T}{{host="h3"}}',
    f'count_over_time({T}{{host="h3"}}[20m])',
    # NaN samples (issue 32 A): computed NaN is a value, answered "NaN"
    "NaN",
    f"{T} * NaN",
    f"sqrt(-{T})",
    f"ln(-{T})",
    f"log2(-{T})",
    f"log10(-{T})",
    *(f"histogram_quantile({q}, rate({IDLE}[1m]))" for q in (0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1)),
    f"({T} - {T}) / 0",
    f"sum(sqrt(-{T}))",
    f"avg(sqrt(-{T}))",
    f"max(sqrt(-{T}))",
    f"min(ln(-{T}))",
    f"max({T} * NaN)",
    f"count(sqrt(-{T}))",
    f"group(sqrt(-{T}))",
    f"stddev({T} * NaN)",
    f"sqrt(-{T}) > 1",
    f"sqrt(-{T}) != 1",
    f"sqrt(-{T}) > bool 1",
    f"topk(1, sqrt(-{T}))",  # which of two NaN samples a k keeps follows Prometheus's heap: not pinned
    f"bottomk(5, sqrt(-{T}))",
    f'count_values("v", sqrt(-{T}) > 0 or {T} * NaN)',
    f"-sqrt(-{T})",
    "vector(NaN)",
    f"scalar({T} * NaN)",
    f"sqrt(-{T}) and {T}",
    f"{T} unless sqrt(-{T})",
    f"clamp(sqrt(-{T}), 0, 5)",
    f"timestamp(sqrt(-{T}))",
    f"absent(sqrt(-{T}))",
]

# both refuse these the same way: (status, errorType) for an instant and a range query
ERRORS = {
    f'label_replace({T}, "host", "", "host", ".*")': ((422, "execution"), (422, "execution")),
    f"{T}[5m]": (None, (400, "bad_data")),
    f"{T}[5m] offset 1m": (None, (400, "bad_data")),
    f"{C} + on(job) {C}": ((422, "execution"), (422, "execution")),
    f'{C} * on(job, instance) group_left label_replace({C}, "method", "x", "", "")': (
        (422, "execution"),
        (422, "execution"),
    ),
    "sum(": ((400, "bad_data"), (400, "bad_data")),
    f"topk(1e300, {T})": ((422, "execution"), (422, "execution")),
    f"holt_winters({T}[10m], 1, 0.5)": ((422, "execution"), (422, "execution")),
    f"rate({T})": ((400, "bad_data"), (400, "bad_data")),
}

_RELATIVE = 1e-9


def _get(base: str, path: str, params: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.get(f"{base}/api/v1/{path}", params=params, timeout=30)
    body: dict[str, Any] = answer.json()
    assert answer.status_code == 200 and body["status"] == "success", (path, params, body)
    return dict(body["data"])


def _points(data: dict[str, Any]) -> dict[Any, list[tuple[float, float]]]:
    """label set -> [(time, value)] of an answer, NaN samples included."""
    kind, result = data["resultType"], data["result"]
    if kind == "scalar":
        rows = {(): [(float(result[0]), float(result[1]))]}
    elif kind == "vector":
        rows = {}
        for item in result:
            rows[tuple(sorted(item["metric"].items()))] = [(float(item["value"][0]), float(item["value"][1]))]
    else:
        rows = {
            tuple(sorted(item["metric"].items())): [(float(t), float(v)) for t, v in item["values"]]
            for item in result
        }
    return {key: points for key, points in rows.items() if points}


def _same(theirs: dict[str, Any], ours: dict[str, Any], what: str) -> None:
    assert theirs["resultType"] == ours["resultType"], what
    expected, found = _points(theirs), _points(ours)
    assert sorted(found) == sorted(expected), (
        f"{what}: series differ\nprometheus: {sorted(expected)}\nartimon: {sorted(found)}"
    )
    for key, points in expected.items():
        assert [t for t, _ in found[key]] == [t for t, _ in points], f"{what}: times of {key} differ"
        for (t, v), (_, w) in zip(points, found[key], strict=True):
            same = math.isclose(v, w, rel_tol=_RELATIVE, abs_tol=1e-12) or v == w
            assert same or (math.isnan(v) and math.isnan(w)), (
                f"{what}: {key} at {t}: prometheus {v!r}, artimon {w!r}"
            )


@pytest.fixture(scope="module")
def bases(prometheus: PrometheusServer, artimon: BackgroundServer) -> tuple[str, str]:
    return prometheus.url, f"{artimon.url}/prometheus"


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_same_answers(expression: str, bases: tuple[str, str], promql_dataset: Any) -> None:
    theirs, ours = bases
    at = promql_dataset.end_s - 7 * 60 + 7  # between two samples
    instant = {"query": expression, "time": at}
    _same(_get(theirs, "query", instant), _get(ours, "query", instant), f"instant {expression}")
    window = {
        "query": expression,
        "start": promql_dataset.start_s + 1800,
        "end": promql_dataset.end_s + 360,
        "step": 97,
    }
    _same(_get(theirs, "query_range", window), _get(ours, "query_range", window), f"range {expression}")


@pytest.mark.parametrize("expression", sorted(ERRORS))
def test_same_refusals(expression: str, bases: tuple[str, str], promql_dataset: Any) -> None:
    at = promql_dataset.end_s - 7 * 60
    window = {"start": promql_dataset.start_s + 1800, "end": promql_dataset.end_s, "step": 60}
    for path, params, expected in (
        ("query", {"query": expression, "time": at}, ERRORS[expression][0]),
        ("query_range", {"query": expression, **window}, ERRORS[expression][1]),
    ):
        answers = [httpx.get(f"{base}/api/v1/{path}", params=params, timeout=30) for base in bases]
        if expected is None:  # both answer, the same
            _same(answers[0].json()["data"], answers[1].json()["data"], f"{path} {expression}")
            continue
        for answer in answers:
            body = answer.json()
            assert (answer.status_code, body["errorType"]) == expected, (
                path,
                expression,
                str(answer.url),
                body,
            )


def test_covers_enough() -> None:
    assert len(EXPRESSIONS) + len(ERRORS) >= 80
