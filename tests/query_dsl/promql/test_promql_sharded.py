"""PromQL through the shards' Thrift fetch answers what it answers over one in-process
store: samples keep their own times across VHMS's wire, and shards' answers merge."""

from __future__ import annotations

from typing import Any

import pytest

from query_dsl.promql import range_query
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


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_shards_answer_as_one_store(expression: str, promql_dataset: Any) -> None:
    whole = Store("15s:1000")
    load_store(promql_dataset.series, whole)
    services = []
    for half in (promql_dataset.series[::2], promql_dataset.series[1::2]):
        store = Store("15s:1000")
        load_store(half, store)
        service = VhmsService(store, http_port=None)
        service.start(register=False)
        services.append(service)
    source = ShardedSource(servers=[(s.host, s.port) for s in services])
    try:
        window = (promql_dataset.end_s - 1800, promql_dataset.end_s, 37)
        sharded = range_query(source, expression, *window).to_prometheus_json()
        local = range_query(LocalClient(whole), expression, *window).to_prometheus_json()
        ours, theirs = _points(sharded), _points(local)
        assert sharded["result"] and sorted(ours) == sorted(theirs)
        for key, points in theirs.items():
            assert ours[key] == pytest.approx(points, rel=1e-12), key
    finally:
        source.close()
        for service in services:
            service.stop()


@pytest.mark.parametrize(
    "expression", ["count_over_time(http_requests_total[30m])", "rate(http_requests_total[30m])"]
)
def test_shards_stitch_their_rings_as_one_store(expression: str, promql_dataset: Any) -> None:
    """Windows reaching past a 10-minute finest ring read the minute ring before it, on each
    shard as on one store, and the answer names the span read coarse once."""
    rings = "15s:40,1m:120"
    whole = Store(rings)
    load_store(promql_dataset.series, whole)
    services = []
    for half in (promql_dataset.series[::2], promql_dataset.series[1::2]):
        store = Store(rings)
        load_store(half, store)
        service = VhmsService(store, http_port=None)
        service.start(register=False)
        services.append(service)
    source = ShardedSource(servers=[(s.host, s.port) for s in services])
    try:
        window = (promql_dataset.end_s - 600, promql_dataset.end_s, 60)
        sharded = range_query(source, expression, *window)
        local = range_query(LocalClient(whole), expression, *window)
        ours, theirs = _points(sharded.to_prometheus_json()), _points(local.to_prometheus_json())
        assert ours and sorted(ours) == sorted(theirs)
        for key, points in theirs.items():
            assert ours[key] == pytest.approx(points, rel=1e-12), key
        if expression.startswith("count"):  # the finest ring alone holds 40 samples
            assert max(value for points in ours.values() for value in points[1::2]) > 50
        assert sharded.warnings == local.warnings and len(local.warnings) == 1
        assert local.warnings[0].startswith("read VHMS's 60 s ring from ")
    finally:
        source.close()
        for service in services:
            service.stop()
