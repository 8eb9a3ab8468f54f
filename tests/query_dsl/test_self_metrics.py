"""The query API's own /metrics: query latencies as a histogram and the process, in the
Prometheus text format that prometheus_client's parser reads; /health."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bookkeeper.ground import BackgroundServer
from query_dsl import create_app
from query_dsl.testing import demo_store
from vhms import LocalClient


def test_metrics_count_queries_by_outcome_and_show_the_process() -> None:
    server = BackgroundServer(create_app(LocalClient(demo_store()), token="secret"))
    server.start()
    try:
        auth = {"authorization": "Bearer secret"}
        for query in ('fetch("http.requests", last=10m)', 'fetch("http.requests", last=10m)', "fetch("):
            httpx.post(f"{server.url}/api/v1/query", json={"query": query}, headers=auth, timeout=30)
        text = httpx.get(f"{server.url}/metrics", timeout=30).text  # no token: no series data there
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        assert samples[("artimon_query_seconds_count", (("outcome", "ok"),))] == 2
        assert samples[("artimon_query_seconds_count", (("outcome", "error"),))] == 1
        assert samples[("artimon_query_seconds_bucket", (("le", "+Inf"), ("outcome", "ok")))] == 2
        assert samples[("process_resident_memory_bytes", ())] > 10_000_000
        assert httpx.get(f"{server.url}/health", timeout=10).json() == {"status": "ok"}
    finally:
        server.stop()
