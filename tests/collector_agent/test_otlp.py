"""The OTLP receiver of the ``prometheus_remote_write`` source: OpenTelemetry's own Python SDK
and OTLP/HTTP exporter send counters, gauges and histograms (10,000 data points) to the
agent, whose vhms sink stores them in a real VHMS and whose raw sink lands them for Spark's
``raw_ingest``; PromQL answers with the labels docs/promql.md promises, the Parquet history
holds each sample once; bad bodies get 400s with reasons."""

from __future__ import annotations

import gzip
import math
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from history_stack import HistoryStack
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import View
from opentelemetry.sdk.resources import Resource

from collector_agent.exceptions import WriteRequestError
from collector_agent.otlp import decode_otlp_request, label_name, metric_name
from collector_agent.write_body import STALE_NAN, WriteLimits

COUNTERS, GAUGES, HISTOGRAMS = 5000, 4000, 1000  # data points: 10,000
BUCKETS = (0.1, 1.0, 10.0)


def export_from_the_sdk(url: str) -> None:
    """Counters, gauges and histograms through the SDK's meter, exported once by its own
    OTLP/HTTP exporter (cumulative, as Prometheus accepts) when the provider shuts down."""
    resource = Resource.create(
        {
            "service.name": "checkout",
            "service.namespace": "shop",
            "service.instance.id": "pod-7",
            "host.name": "node-3",
            "deployment.environment": "test",
        }
    )
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=url, timeout=60), 3_600_000)
    every = View(instrument_name="*", aggregation_cardinality_limit=10_000)  # the default: 2,000
    provider = MeterProvider(resource=resource, metric_readers=[reader], views=[every])
    meter = provider.get_meter("artimon.tests", "1.0")
    requests = meter.create_counter("http.server.requests", unit="{request}")
    for i in range(COUNTERS):
        requests.add(i + 1, {"http.route": f"/r/{i}", "http.method": "GET"})
    temperature = meter.create_gauge("room.temperature", unit="Cel")
    for i in range(GAUGES):
        temperature.set(20.0 + i / 100, {"room": str(i)})
    latency = meter.create_histogram(
        "rpc.duration", unit="s", explicit_bucket_boundaries_advisory=list(BUCKETS)
    )
    for i in range(HISTOGRAMS):
        for value in (0.05, 0.5, 5.0, 50.0):
            latency.record(value, {"rpc.method": f"m{i}"})
    provider.shutdown()  # its last collection, exported once


def test_an_sdk_export_lands_once_and_answers_promql(
    history: HistoryStack, wait: Callable[..., None], spark: Any, tmp_path: Path
) -> None:
    accepted = history.counter("EventAcceptedCount")
    export_from_the_sdk(history.otlp_url)
    samples = COUNTERS + GAUGES + HISTOGRAMS * (len(BUCKETS) + 1 + 2) + 1  # + target_info
    assert history.counter("EventAcceptedCount") == accepted + samples
    assert history.counter("SeriesRefusedCount") == 0

    def stored() -> bool:
        return len(history.query("http_server_requests_total")) == COUNTERS

    wait(stored, timeout=60, what="the counters in VHMS")
    identity = {"job": "shop/checkout", "instance": "pod-7"}
    (one,) = history.query('http_server_requests_total{http_route="/r/41"}')
    assert one["metric"] == {
        "__name__": "http_server_requests_total",
        "http_route": "/r/41",
        "http_method": "GET",
        **identity,
    }
    assert float(one["value"][1]) == 42
    total = float(history.query("sum(http_server_requests_total)")[0]["value"][1])
    assert total == COUNTERS * (COUNTERS + 1) / 2
    assert len(history.query("room_temperature_celsius")) == GAUGES
    (gauge,) = history.query('room_temperature_celsius{room="12"}')
    assert math.isclose(float(gauge["value"][1]), 20.12)
    # histograms: the bookkeeper's series; histogram_quantile reads them
    buckets = history.query('rpc_duration_seconds_bucket{rpc_method="m3"}')
    assert {b["metric"]["le"]: float(b["value"][1]) for b in buckets} == {
        "0.1": 1,
        "1.0": 2,
        "10.0": 3,
        "+Inf": 4,
    }
    assert float(history.query('rpc_duration_seconds_count{rpc_method="m3"}')[0]["value"][1]) == 4
    assert float(history.query('rpc_duration_seconds_sum{rpc_method="m3"}')[0]["value"][1]) == 55.55
    median = history.query('histogram_quantile(0.5, rpc_duration_seconds_bucket{rpc_method="m3"})')
    assert math.isclose(float(median[0]["value"][1]), 1.0)
    # the resource's other attributes: on target_info only
    (info,) = history.query("target_info")
    assert info["metric"] == {
        "__name__": "target_info",
        **identity,
        "host_name": "node-3",
        "deployment_environment": "test",
    } | {k: v for k, v in info["metric"].items() if k.startswith("telemetry_sdk")}
    # every sample once: a series each, counted where the query reads them
    assert float(history.query("count({job='shop/checkout'})")[0]["value"][1]) == samples
    for name in ("http_server_requests_total", "room_temperature_celsius", "rpc_duration_seconds_bucket"):
        assert float(history.query(f"max(count_over_time({name}[2m]))")[0]["value"][1]) == 1
    # and once in the Parquet history, through the raw sink's landing files and raw_ingest
    rows = history.parquet_rows(spark, tmp_path, wait)
    assert len(rows) == samples and len({(row["series"], row["ts"]) for row in rows}) == samples
    assert sum(row["series"].startswith("http_server_requests_total{") for row in rows) == COUNTERS


def otlp_post(url: str, body: bytes, **headers: str) -> httpx.Response:
    sent = {"Content-Type": "application/x-protobuf", **headers}
    return httpx.post(url, content=body, headers=sent, timeout=30)


def gauge_request(
    name: str, unit: str = "", temporality: int = 0, **attributes: str
) -> ExportMetricsServiceRequest:
    request = ExportMetricsServiceRequest()
    metric = request.resource_metrics.add().scope_metrics.add().metrics.add(name=name, unit=unit)
    point = metric.sum.data_points.add() if temporality else metric.gauge.data_points.add()
    if temporality:
        metric.sum.aggregation_temporality = temporality
        metric.sum.is_monotonic = True
    point.time_unix_nano = 1_700_000_000_000_000_000
    point.as_double = 1.0
    for key, value in attributes.items():
        point.attributes.add(key=key).value.string_value = value
    return request


def test_refused_points_are_a_partial_success(history: HistoryStack) -> None:
    refused = history.counter("SeriesRefusedDeltaCount")
    answer = otlp_post(history.otlp_url, gauge_request("delta.things", temporality=1).SerializeToString())
    assert answer.status_code == 200
    partial = ExportMetricsServiceResponse.FromString(answer.content).partial_success
    assert partial.rejected_data_points == 1 and "Delta 1" in partial.error_message
    assert history.counter("SeriesRefusedDeltaCount") == refused + 1


def test_a_gzip_body_is_read(history: HistoryStack, wait: Callable[..., None]) -> None:
    body = gzip.compress(gauge_request("zipped.gauge", **{"a.b": "1"}).SerializeToString())
    answer = otlp_post(history.otlp_url, body, **{"Content-Encoding": "gzip"})
    assert answer.status_code == 200
    assert not ExportMetricsServiceResponse.FromString(answer.content).HasField("partial_success")


@pytest.mark.parametrize(
    ("body", "headers", "status", "why"),
    [
        (b"\xff\xff\xff garbage", {}, 400, "not an OTLP ExportMetricsServiceRequest"),
        (b"x" * 100, {"Content-Encoding": "gzip"}, 400, "not gzip"),
        (gzip.compress(b"\0" * (40 * 1024 * 1024)), {"Content-Encoding": "gzip"}, 400, "maxDecodedBytes"),
        (b"{}", {"Content-Type": "application/json"}, 415, "application/x-protobuf"),
        (b"", {"Content-Encoding": "br"}, 415, "gzip"),
        # 2M empty resource_metrics: 4 MB that would take the runtime 100 MB
        (b"\x0a\x00" * 2_000_000, {}, 400, "maxElements"),
        # attributes nested in arrays deeper than any message should be
        (b"\x0a\x02" * 40, {}, 400, "not an OTLP"),
    ],
    ids=["not-protobuf", "not-gzip", "gzip-bomb", "json", "brotli", "empty-elements", "truncated"],
)
def test_garbage_is_refused_with_a_reason(
    history: HistoryStack, body: bytes, headers: dict[str, str], status: int, why: str
) -> None:
    refused = history.counter("RequestRefusedCount")
    answer = otlp_post(history.otlp_url, body, **headers)
    assert (answer.status_code, why in answer.text) == (status, True), answer.text
    assert history.counter("RequestRefusedCount") == refused + 1


@pytest.mark.parametrize(
    ("name", "unit", "kind", "expected"),
    [
        ("http.server.duration", "s", "histogram", "http_server_duration_seconds"),
        ("process.memory", "By", "gauge", "process_memory_bytes"),
        ("cpu.utilization", "1", "gauge", "cpu_utilization_ratio"),
        ("requests", "{request}", "counter", "requests_total"),
        ("requests_total", "", "counter", "requests_total"),
        ("throughput", "By/s", "gauge", "throughput_bytes_per_second"),
        ("2xx.count", "", "gauge", "_2xx_count"),
        ("a..b", "ms", "sum", "a_b_milliseconds"),
    ],
)
def test_metric_names_as_prometheus_writes_them(name: str, unit: str, kind: str, expected: str) -> None:
    assert metric_name(name, unit, kind) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("http.route", "http_route"),
        ("1st", "key_1st"),
        ("_private", "key_private"),
        ("__x", "__x"),
        ("a-b", "a_b"),
    ],
)
def test_label_names_as_prometheus_writes_them(key: str, expected: str) -> None:
    assert label_name(key) == expected


def bits(value: float) -> int:
    return int(struct.unpack("<q", struct.pack("<d", value))[0])


def test_summaries_stale_points_collisions_and_promoted_attributes() -> None:
    request = ExportMetricsServiceRequest()
    resource_metrics = request.resource_metrics.add()
    for key, value in (("service.name", "api"), ("k8s.pod.name", "p1"), ("region", "eu")):
        resource_metrics.resource.attributes.add(key=key).value.string_value = value
    metrics = resource_metrics.scope_metrics.add().metrics
    summary = metrics.add(name="rpc.latency", unit="ms").summary.data_points.add(
        time_unix_nano=5_000_000_000, count=3, sum=6.0
    )
    summary.quantile_values.add(quantile=0.5, value=2.0)
    gone = metrics.add(name="queue.depth").gauge.data_points.add(time_unix_nano=6_000_000_000, flags=1)
    gone.attributes.add(key="a.b").value.string_value = "x"
    gone.attributes.add(key="a_b").value.int_value = 7
    gone.attributes.add(key="region").value.string_value = "us"
    promote = frozenset({"region", "k8s.pod.name"})
    batch = decode_otlp_request(request.SerializeToString(), "c", WriteLimits(), promote).batch
    keys = {
        f"{batch.names[n]}{{{batch.label_sets[s]}}}"
        for n, s in zip(batch.name_ids, batch.label_set_ids, strict=True)
    }
    assert keys == {
        "rpc_latency_milliseconds{job=api,k8s_pod_name=p1,quantile=0.5,region=eu}",
        "rpc_latency_milliseconds_sum{job=api,k8s_pod_name=p1,region=eu}",
        "rpc_latency_milliseconds_count{job=api,k8s_pod_name=p1,region=eu}",
        # the point's own region wins over the promoted one; a.b and a_b meet as a_b
        "queue_depth{a_b=x;7,job=api,k8s_pod_name=p1,region=us}",
        "target_info{job=api,k8s_pod_name=p1,region=eu}",
    }
    stale = [
        int(v) for n, v in zip(batch.name_ids, batch.values, strict=True) if batch.names[n] == "queue_depth"
    ]
    assert stale == [bits(STALE_NAN)] and bits(STALE_NAN) == 0x7FF0000000000002


def test_exponential_histograms_and_absurd_spans_are_refused() -> None:
    request = ExportMetricsServiceRequest()
    resource_metrics = request.resource_metrics.add()
    resource_metrics.resource.attributes.add(key="service.name").value.string_value = "api"
    resource_metrics.resource.attributes.add(key="host.name").value.string_value = "h"
    metrics = resource_metrics.scope_metrics.add().metrics
    metrics.add(name="native").exponential_histogram.data_points.add(time_unix_nano=1)
    decoded = decode_otlp_request(request.SerializeToString(), "c", WriteLimits())
    assert decoded.refused == {"Unsupported": 1} and len(decoded.batch) == 1  # target_info alone
    metrics.add(name="late").gauge.data_points.add(time_unix_nano=3_000_000_000 * 10**9, as_double=1)
    with pytest.raises(WriteRequestError, match="maxSamples"):  # target_info over 95 years
        decode_otlp_request(request.SerializeToString(), "c", WriteLimits())
