"""Windows as long as Prometheus users write (issue 32 C), over a store shaped as
``artimon up --interval 5`` makes it (``resolutions_for(5)``: the 5 s ring kept 2 hours):
every ``[1h]`` window answers from the finest ring, as a real Prometheus does over the same
samples; a window reaching further back reads the finest ring where it reaches and the
5-minute ring before it, and says which span it read coarse."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from artimon.servers import PrometheusServer, create_blocks
from artimon.stack import resolutions_for
from bookkeeper.ground import BackgroundServer
from query_dsl import Limits, create_app
from query_dsl.promql import instant_query, range_query
from query_dsl.promql.dataset import Series, generate, write_openmetrics
from query_dsl.testing import load_store
from vhms import LocalClient
from vhms.server import Store

from .test_promql_crosscheck import _get, _same

INTERVAL_S = 5
POINTS = 150 * 60 // INTERVAL_S  # 2.5 hours of polls: half an hour more than the finest ring keeps
COARSE_MS = 300_000
FUNCTIONS = [
    "count_over_time",
    "changes",
    "idelta",
    "irate",
    "rate",
    "increase",
    "delta",
    "resets",
    "deriv",
    "avg_over_time",
    "max_over_time",
    "sum_over_time",
    "last_over_time",
    "stddev_over_time",
]


class Setup:
    def __init__(self, series: list[Series], store: Store, end_s: int) -> None:
        self.series = series
        self.store = store
        self.end_s = end_s
        newest = max(int(s.times_ms[-1]) for s in series)
        self.oldest_fine_ms = (
            (newest // (INTERVAL_S * 1000) - (2 * 3600 // INTERVAL_S - 1)) * INTERVAL_S * 1000
        )


@pytest.fixture(scope="module")
def setup() -> Setup:
    series = generate(int(time.time()) // 60 * 60 - 60, points=POINTS, interval_s=INTERVAL_S)
    store = Store(resolutions_for(INTERVAL_S))
    load_store(series, store)
    end_s = max(int(s.times_ms[-1]) for s in series) // 1000
    return Setup(series, store, end_s)


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory, setup: Setup) -> Iterator[tuple[str, str]]:
    home: Path = tmp_path_factory.mktemp("prometheus-long")
    server = PrometheusServer(home)
    create_blocks(write_openmetrics(setup.series, home / "data.om"), server.tsdb_dir)
    api = BackgroundServer(create_app(LocalClient(setup.store), limits=Limits(timeout_s=20)), name="long-api")
    api.start()
    try:
        with server:
            yield server.url, f"{api.url}/prometheus"
    finally:
        api.stop()


@pytest.mark.parametrize("metric", ["http_requests_total", "cpu_temp_celsius"])
@pytest.mark.parametrize("function", FUNCTIONS)
def test_an_hour_window_answers_the_finest_ring(
    function: str, metric: str, setup: Setup, bases: tuple[str, str]
) -> None:
    theirs, ours = bases
    expression = f"{function}({metric}[1h])"
    for at in (setup.end_s - 3, setup.end_s - 1800 + 7):
        instant: dict[str, Any] = {"query": expression, "time": at}
        _same(_get(theirs, "query", instant), _get(ours, "query", instant), f"instant {expression} at {at}")
    window = {"query": expression, "start": setup.end_s - 3300, "end": setup.end_s, "step": 67}
    _same(_get(theirs, "query_range", window), _get(ours, "query_range", window), f"range {expression}")
    answer = httpx.get(f"{ours}/api/v1/query_range", params=window, timeout=30).json()
    assert "warnings" not in answer  # every window within the finest ring


def _stitched(each: Series, oldest_fine_ms: int) -> tuple[np.ndarray, np.ndarray]:
    """The samples a stitched read gives of ``each``: the 5-minute buckets that end before
    the one straddling the finest ring's oldest bucket (each its last sample, at the
    bucket's start), then the finest ring's samples."""
    times, values = each.times_ms, each.values
    stitch_ms = oldest_fine_ms // COARSE_MS * COARSE_MS
    old = times < stitch_ms
    buckets = times[old] // COARSE_MS
    last = np.flatnonzero(np.append(np.diff(buckets) != 0, True))  # the last sample of each bucket
    fine = times >= oldest_fine_ms
    return (
        np.concatenate([buckets[last] * COARSE_MS, times[fine]]),
        np.concatenate([values[old][last], values[fine]]),
    )


def _expected(setup: Setup, metric: str, at_ms: int, range_ms: int) -> dict[str, tuple[float, float, float]]:
    """instance/method -> (count, sum, changes) of the stitched samples in ``[at - range, at]``."""
    out = {}
    for each in setup.series:
        if each.name != metric:
            continue
        times, values = _stitched(each, setup.oldest_fine_ms)
        inside = values[(times >= at_ms - range_ms) & (times <= at_ms)]
        key = f"{each.labels['instance']}/{each.labels['method']}/{each.labels['job']}"
        out[key] = (float(len(inside)), float(inside.sum()), float((np.diff(inside) != 0).sum()))
    return out


def _answered(source: LocalClient, function: str, expression: str, at_s: float) -> dict[str, float]:
    result = instant_query(source, f"{function}({expression})", at_s).to_prometheus_json()["result"]
    return {
        f"{r['metric']['instance']}/{r['metric']['method']}/{r['metric']['job']}": float(r["value"][1])
        for r in result
    }


def test_a_window_past_the_finest_ring_is_stitched_and_says_where(setup: Setup) -> None:
    source = LocalClient(setup.store)
    at_s = setup.end_s - 2
    expected = _expected(setup, "http_requests_total", at_s * 1000, 150 * 60_000)
    for column, function in enumerate(("count_over_time", "sum_over_time", "changes")):
        found = _answered(source, function, "http_requests_total[150m]", at_s)
        assert found == pytest.approx({key: value[column] for key, value in expected.items()}), function
    # the finest ring alone would hold 1,440 polls; the 5-minute ring adds those before it
    counts = {value[0] for value in expected.values()}
    assert all(1440 < count < 1440 + 30 / 5 + 1 for count in counts), counts
    result = instant_query(source, "count_over_time(http_requests_total[150m])", at_s)
    first = (at_s * 1000 - 150 * 60_000) // COARSE_MS * COARSE_MS
    stitch_ms = setup.oldest_fine_ms // COARSE_MS * COARSE_MS
    assert result.warnings == [
        f"read VHMS's 300 s ring from {_utc(first)} to {_utc(stitch_ms)}: the finest (5 s) keeps "
        "nothing older; there a sample is its bucket's aggregate, at the bucket's start"
    ]


def test_a_range_query_is_stitched_at_each_step(setup: Setup) -> None:
    source = LocalClient(setup.store)
    start_s, end_s = setup.end_s - 1200, setup.end_s
    answer = range_query(source, "count_over_time(http_requests_total[140m])", start_s, end_s, 300)
    for item in answer.to_prometheus_json()["result"]:
        key = f"{item['metric']['instance']}/{item['metric']['method']}/{item['metric']['job']}"
        for at, value in item["values"]:
            expected = _expected(setup, "http_requests_total", int(at * 1000), 140 * 60_000)[key][0]
            assert float(value) == expected, (key, at)
    assert len(answer.warnings) == 1 and "300 s ring" in answer.warnings[0]


def test_the_http_answer_carries_the_warning(setup: Setup, bases: tuple[str, str]) -> None:
    _, ours = bases
    params = {"query": "changes(up[3h])", "time": setup.end_s}
    body = httpx.get(f"{ours}/api/v1/query", params=params, timeout=30).json()
    assert body["status"] == "success" and len(body["data"]["result"]) == 6
    assert len(body["warnings"]) == 1 and body["warnings"][0].startswith("read VHMS's 300 s ring from ")


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
