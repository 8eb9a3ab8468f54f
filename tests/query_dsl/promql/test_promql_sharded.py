"""PromQL through the shards' Thrift fetch answers what it answers over one in-process
store: samples keep their own times across VHMS's wire, and shards' answers merge."""

from __future__ import annotations

from typing import Any

import pytest

from query_dsl.promql import PromQLResult, range_query
from query_dsl.sources import ShardedSource
from query_dsl.testing import load_store
from vhms import LocalClient
from vhms.server import Store, VhmsService

EXPRESSIONS = [
    "rate(http_requests_total[1m])",
    "timestamp(cpu_temp_celsius)",
    "sum by (job) (increase(http_requests_total[5m]))",
    "last_over_time(up[30s])",
]


def _points(answer: dict[str, Any]) -> dict[tuple[tuple[str, str], ...], list[float]]:
    """Series -> [time, value, time, value...]: sums across series may differ in the last digit
    (the shards' order is not the store's: docs/promql.md)."""
    return {
        tuple(sorted(item["metric"].items())): [float(x) for point in item["values"] for x in point]
        for item in answer["result"]
    }


def _same_answers(rings: str, expression: str, window: tuple[int, int, int], series: Any) -> PromQLResult:
    """``expression`` over two shards (every other series each, through their Thrift fetch)
    and over one store of every series, the same rings: the same series and values (sums
    within 1e-12); the shards' answer."""
    whole = Store(rings)
    load_store(series, whole)
    services = []
    for half in (series[::2], series[1::2]):
        store = Store(rings)
        load_store(half, store)
        service = VhmsService(store, http_port=None)
        service.start(register=False)
        services.append(service)
    source = ShardedSource(servers=[(s.host, s.port) for s in services])
    try:
        sharded = range_query(source, expression, *window)
        local = range_query(LocalClient(whole), expression, *window)
    finally:
        source.close()
        for service in services:
            service.stop()
    ours, theirs = _points(sharded.to_prometheus_json()), _points(local.to_prometheus_json())
    assert ours and sorted(ours) == sorted(theirs)
    for key, points in theirs.items():
        assert ours[key] == pytest.approx(points, rel=1e-12), key
    assert sharded.warnings == local.warnings
    return sharded


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_shards_answer_as_one_store(expression: str, promql_dataset: Any) -> None:
    window = (promql_dataset.end_s - 1800, promql_dataset.end_s, 37)
    _same_answers("15s:1000", expression, window, promql_dataset.series)


@pytest.mark.parametrize(
    "expression", ["count_over_time(http_requests_total[30m])", "rate(http_requests_total[30m])"]
)
def test_shards_stitch_their_rings_as_one_store(expression: str, promql_dataset: Any) -> None:
    """Windows reaching past a 10-minute finest ring read the minute ring before it, on each
    shard as on one store, and the answer names the span read coarse once."""
    window = (promql_dataset.end_s - 600, promql_dataset.end_s, 60)
    sharded = _same_answers("15s:40,1m:120", expression, window, promql_dataset.series)
    if expression.startswith("count"):  # the finest ring alone holds 40 samples
        counts = [
            float(value) for item in sharded.to_prometheus_json()["result"] for _, value in item["values"]
        ]
        assert max(counts) > 50
    assert len(sharded.warnings) == 1 and sharded.warnings[0].startswith("read VHMS's 60 s ring from ")
