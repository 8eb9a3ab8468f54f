"""Remote write 2.0 into the ``prometheus_remote_write`` source: a real Prometheus 3 (built
with ``go install`` into ``~/.cache/artimon/go/bin``, see :data:`PROMETHEUS_3`) sending
``protobuf_message: io.prometheus.write.v2.Request``, and streams of requests built with the
protobuf runtime from Prometheus's published ``types.proto`` as a Prometheus 3 sends them (a
symbol table, label references, metadata, exemplars), land in a real VHMS and (the real sender
and a stream of 13,000 samples, through :mod:`history_stack`) once in the Parquet history; the
answer carries the ``X-Prometheus-Remote-Write-*-Written`` headers; bad bodies get 400s with
reasons."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cramjam
import httpx
import numpy as np
import pytest
from history_stack import HistoryStack
from test_remote_write import Stack, now, post, prometheus_get, start_stack, stored

from artimon.servers import PrometheusServer, free_port
from collector_agent.remote_write_v2 import CONTENT_TYPE, messages_v2

STALE = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]
V2 = {"Content-Type": CONTENT_TYPE, "X-Prometheus-Remote-Write-Version": "2.0.0"}
# GOPATH=~/.cache/artimon/go GOBIN=~/.cache/artimon/go/bin \
#   go install github.com/prometheus/prometheus/cmd/prometheus@v0.316.0   (Prometheus 3.x)
PROMETHEUS_3 = Path.home() / ".cache" / "artimon" / "go" / "bin" / "prometheus"
PROMETHEUS_3_CONFIG = """
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: prometheus
    convert_classic_histograms_to_nhcb: true
    static_configs:
      - targets: ["127.0.0.1:{port}"]
remote_write:
  - url: "{url}"
    protobuf_message: io.prometheus.write.v2.Request
    send_native_histograms: true
    queue_config:
      batch_send_deadline: 1s
      max_samples_per_send: 500
      min_backoff: 100ms
      max_backoff: 1s
"""


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    started = start_stack()
    try:
        yield started
    finally:
        started.agent.stop()
        started.vhms.stop()


@pytest.mark.slow
@pytest.mark.skipif(not PROMETHEUS_3.exists(), reason=f"no Prometheus 3 at {PROMETHEUS_3} (see its comment)")
def test_a_real_prometheus_3_remote_writes_v2_into_vhms_and_the_history(
    history: HistoryStack, tmp_path: Path, wait: Callable[..., None], spark: Any
) -> None:
    port = free_port()
    config = PROMETHEUS_3_CONFIG.format(port=port, url=history.url)
    prometheus = PrometheusServer(tmp_path / "prometheus3", port, config=config, binary=str(PROMETHEUS_3))
    prometheus.start()
    try:
        raw: dict[str, Any] = {}

        def scraped() -> bool:
            query = 'prometheus_http_requests_total{handler="/metrics"}[1m]'
            raw["series"] = prometheus_get(prometheus, "/api/v1/query", query=query)["result"]
            return bool(raw["series"]) and len(raw["series"][0]["values"]) >= 3

        wait(scraped, timeout=60, what="three scrapes in Prometheus 3")
        labels = dict(raw["series"][0]["metric"])
        name = labels.pop("__name__")
        samples = [(round(float(t) * 1000), float(v)) for t, v in raw["series"][0]["values"][:3]]
        first, last = samples[0][0], samples[-1][0]
        selector = name + "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"

        def arrived() -> bool:
            values = stored(history.vhms.store, selector, first - 1000, last + 1000)
            return len(values) == 1 and len(next(iter(values.values()))) >= 3

        wait(arrived, timeout=60, what="the same samples in VHMS, sent in remote write 2.0")
        ((_, buckets),) = stored(history.vhms.store, selector, first - 1000, last + 1000).items()
        for timestamp, value in samples:
            assert buckets[timestamp // 1000 * 1000] == value
        build = prometheus_get(prometheus, "/api/v1/query", query="prometheus_build_info")["result"][0][
            "metric"
        ]
        in_vhms = history.vhms.store.fetch(
            "prometheus_build_info", first, last + 10_000, resolution=1
        ).series()
        assert in_vhms == [
            ("prometheus_build_info", {k: v for k, v in build.items() if k != "__name__" and v})
        ]
        assert (
            history.counter("RemoteWrite2RequestCount") >= 1
            and history.counter("RemoteWrite1RequestCount") == 0
        )
        assert history.counter("MetadataIgnoredCount") > 0  # 2.0 carries each series' type and help
    finally:
        prometheus.stop()
    # once it has stopped (its queue flushed): each sample once in the history, and the series'
    # samples there in as many 1 s buckets as VHMS holds (two scrapes late and early share one)
    drained, put = history.agent.sinks["out"].metrics, history.agent.channels["ch"].metrics
    wait(lambda: drained()["EventDrainSuccessCount"] == put()["EventPutSuccessCount"], what="all in VHMS")
    ((key, buckets),) = stored(history.vhms.store, selector, now() - 120_000, now() + 1000).items()
    rows = history.parquet_rows(spark, tmp_path / "history", wait)
    written = [(row["series"], row["ts"]) for row in rows if not row["series"].startswith("rw2_")]
    assert len(set(written)) == len(written)
    assert len({ts // 1000 for series, ts in written if series == key}) == len(buckets) >= 3


class RequestBuilder:
    """A ``Request`` the way Prometheus's writer builds one: each string once in ``symbols``."""

    def __init__(self) -> None:
        self.request = messages_v2["Request"]()
        self.symbols: dict[str, int] = {}
        self.ref("")

    def ref(self, text: str) -> int:
        if text not in self.symbols:
            self.symbols[text] = len(self.symbols)
            self.request.symbols.append(text)
        return self.symbols[text]

    def series(self, labels: dict[str, str], samples: list[tuple[float, int]], kind: int = 2) -> object:
        one = self.request.timeseries.add()
        for name, value in labels.items():
            one.labels_refs.extend([self.ref(name), self.ref(value)])
        for value, timestamp in samples:
            one.samples.add(value=value, timestamp=timestamp)
        one.metadata.type = kind
        one.metadata.help_ref = self.ref(f"help of {labels.get('__name__')}")
        return one

    def body(self) -> bytes:
        return bytes(cramjam.snappy.compress_raw(self.request.SerializeToString()))


def test_a_v2_stream_lands_in_vhms_with_written_headers(stack: Stack, wait: Callable[..., None]) -> None:
    start = now() - 10_000
    for step in range(5):  # five requests, as a queue shard sends them one after another
        builder = RequestBuilder()
        at = start + step * 1000
        for instance in ("a:9100", "b:9100"):
            builder.series(
                {"__name__": "node_load1", "instance": instance, "job": "node"}, [(step + 0.5, at)]
            )
            counter = builder.series(
                {"__name__": "http_requests_total", "instance": instance, "code": "200"},
                [(10.0 * step, at)],
                1,
            )
            exemplar = counter.exemplars.add(value=1.0, timestamp=at)  # type: ignore[attr-defined]
            exemplar.labels_refs.extend([builder.ref("trace_id"), builder.ref("abc")])
        answer = post(stack.url, builder.body(), **V2)
        assert answer.status_code == 204, answer.text
        assert answer.headers["X-Prometheus-Remote-Write-Samples-Written"] == "4"
        assert answer.headers["X-Prometheus-Remote-Write-Histograms-Written"] == "0"
        assert answer.headers["X-Prometheus-Remote-Write-Exemplars-Written"] == "0"

    def arrived() -> bool:
        values = stored(stack.vhms.store, "node_load1", start - 1000, start + 6000)
        return len(values) == 2 and all(len(v) == 5 for v in values.values())

    wait(arrived, what="five samples of both node_load1 series in VHMS")
    loads = stored(stack.vhms.store, "node_load1", start - 1000, start + 6000)
    assert set(loads) == {"node_load1{instance=a:9100,job=node}", "node_load1{instance=b:9100,job=node}"}
    assert sorted(loads["node_load1{instance=a:9100,job=node}"].values()) == [0.5, 1.5, 2.5, 3.5, 4.5]
    counters = stored(stack.vhms.store, 'http_requests_total{code="200"}', start - 1000, start + 6000)
    assert {len(v) for v in counters.values()} == {5}
    assert stack.counter("ExemplarsIgnoredCount") >= 10


STEPS, COUNTERS, GAUGES, HISTOGRAMS = 20, 300, 200, 25  # per step; histograms: 4 buckets, sum, count


def stream_request(at: int, step: int) -> bytes:
    """One request of a stream: every series once, at ``at``, its labels through the symbol table."""
    builder = RequestBuilder()
    for i in range(COUNTERS):
        labels = {
            "__name__": "rw2_requests_total",
            "job": "shop",
            "instance": f"pod-{i % 3}",
            "path": f"/p/{i}",
        }
        builder.series(labels, [(float(step * (i + 1)), at)], kind=1)
    for i in range(GAUGES):
        builder.series(
            {"__name__": "rw2_temperature_celsius", "job": "shop", "room": str(i)}, [(i + step / 8, at)]
        )
    for i in range(HISTOGRAMS):
        series = builder.series({"__name__": "rw2_rpc_seconds", "job": "shop", "method": f"m{i}"}, [], kind=3)
        one = series.histograms.add(schema=-53, count_int=4 * step, sum=1.5 * step, timestamp=at)  # type: ignore[attr-defined]
        one.custom_values.extend([0.1, 1.0, 10.0])
        one.positive_spans.add(offset=0, length=4)
        one.positive_deltas.extend([step, 0, 0, 0])  # a quarter of the count in each bucket
    return builder.body()


def test_a_v2_stream_lands_once_in_vhms_and_the_parquet_history(
    history: HistoryStack, wait: Callable[..., None], spark: Any, tmp_path: Path
) -> None:
    start = now() - 30_000
    store = history.vhms.store
    accepted, refused = history.counter("EventAcceptedCount"), history.counter("SeriesRefusedCount")
    before = store.stats["samples_stored"]
    for step in range(STEPS):  # one request a second, as a queue shard sends them
        answer = post(history.url, stream_request(start + step * 1000, step), **V2)
        assert answer.status_code == 204, answer.text
        assert answer.headers["X-Prometheus-Remote-Write-Samples-Written"] == str(COUNTERS + GAUGES)
        assert answer.headers["X-Prometheus-Remote-Write-Histograms-Written"] == str(HISTOGRAMS)
    samples = STEPS * (COUNTERS + GAUGES + HISTOGRAMS * 6)  # 13,000
    assert history.counter("EventAcceptedCount") == accepted + samples
    assert history.counter("SeriesRefusedCount") == refused
    wait(lambda: store.stats["samples_stored"] >= before + samples, timeout=60, what="the stream in VHMS")
    (one,) = history.query('rw2_requests_total{path="/p/41"}')
    assert one["metric"] == {
        "__name__": "rw2_requests_total",
        "job": "shop",
        "instance": "pod-2",
        "path": "/p/41",
    }
    assert float(one["value"][1]) == (STEPS - 1) * 42
    assert float(history.query('rw2_temperature_celsius{room="7"}')[0]["value"][1]) == 7 + (STEPS - 1) / 8
    median = history.query('histogram_quantile(0.5, rw2_rpc_seconds_bucket{method="m3"})')
    assert median[0]["metric"] == {"job": "shop", "method": "m3"} and float(median[0]["value"][1]) == 1.0
    # every sample once: each series holds one sample per request, counted where queries read them
    total = 0.0
    for name in (
        "requests_total",
        "temperature_celsius",
        *(f"rpc_seconds_{s}" for s in ("bucket", "sum", "count")),
    ):
        counts = history.query(f"count_over_time(rw2_{name}[2m])")
        assert {float(c["value"][1]) for c in counts} == {STEPS}
        total += sum(float(c["value"][1]) for c in counts)
    assert total == samples
    rows = [row for row in history.parquet_rows(spark, tmp_path, wait) if row["series"].startswith("rw2_")]
    assert len(rows) == samples and len({(row["series"], row["ts"]) for row in rows}) == samples
    assert sum(row["series"].startswith("rw2_rpc_seconds_bucket{") for row in rows) == STEPS * HISTOGRAMS * 4
    assert store.stats["samples_stored"] == before + samples  # no batch delivered twice meanwhile


def test_a_stale_marker_and_refused_series_in_v2(stack: Stack, wait: Callable[..., None]) -> None:
    at = now() - 3000
    builder = RequestBuilder()
    builder.series({"__name__": "rw2_stale"}, [(1.0, at), (STALE, at + 1000)])
    builder.series({"__name__": "0bad"}, [(1.0, at)])
    builder.series({"job": "no-name"}, [(1.0, at)])
    histogram = builder.series({"__name__": "rw2_native"}, [])
    histogram.histograms.add(timestamp=at)  # type: ignore[attr-defined]
    broken = builder.request.timeseries.add()
    broken.labels_refs.extend([builder.ref("__name__"), 10_000])  # past the symbol table
    broken.samples.add(value=1.0, timestamp=at)
    refused = stack.counter("SeriesRefusedCount")
    answer = post(stack.url, builder.body(), **V2)
    assert answer.status_code == 400  # the good series are stored; Prometheus drops the rest
    assert answer.headers["X-Prometheus-Remote-Write-Samples-Written"] == "2"
    assert "4 series refused" in answer.text
    for reason in ("InvalidName 1", "NoName 1", "Histogram 1", "UnknownSymbol 1"):
        assert reason in answer.text
    assert stack.counter("SeriesRefusedCount") == refused + 4
    wait(lambda: stored(stack.vhms.store, "rw2_stale", at - 1000, at + 2000), what="rw2_stale stored")
    start = at // 1000 * 1000
    bits = stack.vhms.store.fetch("rw2_stale", start, start + 2000, resolution=1).values.view(np.uint64)[0]
    assert bits.tolist()[:2] == [0x3FF0000000000000, 0x7FF0000000000002]  # 1.0, then the marker


def test_custom_bucket_histograms_become_the_bookkeepers_series(
    stack: Stack, wait: Callable[..., None]
) -> None:
    at = now() - 2000
    builder = RequestBuilder()
    integer = builder.series({"__name__": "rw2_rpc_seconds", "job": "x"}, [], kind=3)
    one = integer.histograms.add(schema=-53, count_int=6, sum=12.5, timestamp=at)  # type: ignore[attr-defined]
    one.custom_values.extend([0.1, 1.0, 10.0])
    one.positive_spans.add(offset=0, length=2)  # buckets 0 and 1...
    one.positive_spans.add(offset=1, length=1)  # ...and 3 (+Inf); bucket 2 holds nothing
    one.positive_deltas.extend([2, 1, -2])  # counts 2, 3, 1
    floats = builder.series({"__name__": "rw2_float_seconds"}, [], kind=3)
    two = floats.histograms.add(schema=-53, count_float=3.0, sum=1.5, timestamp=at)  # type: ignore[attr-defined]
    two.custom_values.append(1.0)
    two.positive_spans.add(offset=0, length=2)
    two.positive_counts.extend([1.0, 2.0])
    exponential = builder.series({"__name__": "rw2_exponential"}, [], kind=3)
    exponential.histograms.add(schema=3, count_int=1, timestamp=at)  # type: ignore[attr-defined]
    overflowing = builder.series({"__name__": "rw2_overflowing"}, [], kind=3)
    bad = overflowing.histograms.add(schema=-53, count_int=1, timestamp=at)  # type: ignore[attr-defined]
    bad.custom_values.append(1.0)
    bad.positive_spans.add(offset=5, length=1)  # past the two buckets
    bad.positive_deltas.append(1)
    answer = post(stack.url, builder.body(), **V2)
    assert answer.status_code == 400 and "Histogram 2" in answer.text  # the exponential one, the bad one
    assert answer.headers["X-Prometheus-Remote-Write-Samples-Written"] == "0"
    assert answer.headers["X-Prometheus-Remote-Write-Histograms-Written"] == "2"

    def values(selector: str) -> dict[str, float]:
        found = stored(stack.vhms.store, selector, at - 1000, at + 1000)
        return {key: next(iter(points.values())) for key, points in found.items() if points}

    wait(lambda: len(values("rw2_rpc_seconds_bucket")) == 4, what="the buckets in VHMS")
    assert values("rw2_rpc_seconds_bucket") == {
        "rw2_rpc_seconds_bucket{job=x,le=0.1}": 2,
        "rw2_rpc_seconds_bucket{job=x,le=1.0}": 5,
        "rw2_rpc_seconds_bucket{job=x,le=10.0}": 5,
        "rw2_rpc_seconds_bucket{job=x,le=+Inf}": 6,
    }
    assert values("rw2_rpc_seconds_sum") == {"rw2_rpc_seconds_sum{job=x}": 12.5}
    assert values("rw2_rpc_seconds_count") == {"rw2_rpc_seconds_count{job=x}": 6}
    assert values("rw2_float_seconds_bucket") == {
        "rw2_float_seconds_bucket{le=1.0}": 1,
        "rw2_float_seconds_bucket{le=+Inf}": 3,
    }


def test_content_types_are_negotiated(stack: Stack) -> None:
    builder = RequestBuilder()
    builder.series({"__name__": "rw2_negotiated"}, [(1.0, now())])
    as_v1 = post(stack.url, builder.body(), **{"Content-Type": "application/x-protobuf"})
    # read as 1.0, a 2.0 body is fields 1.0 does not know: nothing written, and the header says so
    assert (as_v1.status_code, as_v1.headers["X-Prometheus-Remote-Write-Samples-Written"]) == (204, "0")
    quoted = 'application/x-protobuf; proto="io.prometheus.write.v2.Request"'
    assert post(stack.url, builder.body(), **{"Content-Type": quoted}).status_code == 204
    unknown = "application/x-protobuf;proto=io.prometheus.write.v9.Request"
    assert post(stack.url, builder.body(), **{"Content-Type": unknown}).status_code == 415


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\xff\xff\xff garbage", "not an io.prometheus.write.v2.Request"),
        (b"\x22\x01x", "symbols table does not start with the empty string"),  # symbols = ["x"]
        (b"\x2a\x00" * 100_000, "maxElements=20,000"),  # 100,000 empty series in 200 KB
        (b"\x2a\x03\x0a\x09\x00", "not an io.prometheus.write.v2.Request"),  # refs run past the series
        (b"\x2a\xa4\x8d\x06\x0a\xa0\x8d\x06" + b"\x00" * 100_000, "maxElements=20,000"),  # 100,000 label refs
    ],
    ids=["not-protobuf", "first-symbol", "empty-series", "truncated", "packed-refs"],
)
def test_garbage_v2_is_refused_with_a_reason(stack: Stack, data: bytes, why: str) -> None:
    answer = post(stack.url, bytes(cramjam.snappy.compress_raw(data)), **V2)
    assert answer.status_code == 400 and why in answer.text, answer.text


def test_v2_counts_samples_against_max_samples(stack: Stack) -> None:
    builder = RequestBuilder()
    builder.series({"__name__": "rw2_many"}, [(1.0, now() - i) for i in range(5001)])
    answer = post(stack.url, builder.body(), **V2)
    assert answer.status_code == 400 and "maxSamples=5,000" in answer.text
    assert httpx.post(stack.url, content=b"", headers={**V2, "Content-Encoding": "gzip"}).status_code == 415
