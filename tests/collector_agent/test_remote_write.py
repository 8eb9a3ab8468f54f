"""The ``prometheus_remote_write`` source: a real Prometheus scrapes itself and remote-writes
to the agent, whose vhms sink stores the samples in a real VHMS; bad requests get the
status that tells Prometheus whether to retry, are counted, and lose nothing else."""

from __future__ import annotations

import json
import math
import struct
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cramjam
import httpx
import numpy as np
import pytest

from artimon.servers import PrometheusServer, free_port
from artimon.stack import agent_properties
from collector_agent import Agent
from collector_agent.remote_write import messages
from vhms.server import Store, VhmsService


def properties(capacity: int, vhms_port: int) -> str:
    """A remote-write receiver with small limits, into a VHMS shard at the samples' own times."""
    receiver = {
        "type": "prometheus_remote_write",
        "bind": "127.0.0.1",
        "port": 0,
        "maxBodySize": 262144,
        "maxDecodedBytes": 524288,
        "maxSamples": 5000,
        "maxElements": 20000,
        "readTimeout": 1,
        "channels": "ch",
    }
    channel = {"type": "memory", "capacity": capacity, "transactionCapacity": capacity, "keep-alive": 0}
    out = {
        "type": "vhms",
        "channel": "ch",
        "servers": f"default@127.0.0.1:{vhms_port}",
        "time": "sample",
        "timeout": 5,
        "batchSize": capacity,
        "maxBackoffSleep": 100,
    }
    return agent_properties("a", sources={"prom": receiver}, channels={"ch": channel}, sinks={"out": out})


PROMETHEUS = """
global:
  scrape_interval: 2s
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ["127.0.0.1:{port}"]
remote_write:
  - url: "{url}"
    queue_config:
      batch_send_deadline: 1s
      min_backoff: 100ms
      max_backoff: 1s
"""


@dataclass
class Stack:
    vhms: VhmsService
    agent: Agent

    @property
    def url(self) -> str:
        return self.agent.sources["prom"].url  # type: ignore[attr-defined,no-any-return]

    def counter(self, name: str) -> float:
        return self.agent.sources["prom"].metrics()[name]


def start_stack(capacity: int = 100) -> Stack:
    store = Store("1s:900,60s:60")
    service = VhmsService(store, http_port=None, snapshot_dir=None, wal=False)
    service.start(register=False)
    agent = Agent.from_properties(properties(capacity, service.port), "a", {})
    agent.start()
    return Stack(service, agent)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    started = start_stack()
    try:
        yield started
    finally:
        started.agent.stop()
        started.vhms.stop()


def write_request(series: list[tuple[dict[str, str], list[tuple[float, int]]]]) -> bytes:
    request = messages["WriteRequest"]()
    for labels, samples in series:
        one = request.timeseries.add()
        for name, value in labels.items():
            one.labels.add(name=name, value=value)
        for value, timestamp in samples:
            one.samples.add(value=value, timestamp=timestamp)
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


def post(url: str, body: bytes, **headers: str) -> httpx.Response:
    sent = {"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf", **headers}
    return httpx.post(url, content=body, headers=sent, timeout=10)


def stored(store: Store, selector: str, start_ms: int, end_ms: int) -> dict[str, dict[int, float]]:
    """``{series key: {bucket start: value}}`` of the finest ring, gaps left out."""
    result = store.fetch(selector, start_ms, end_ms, resolution=1)
    out: dict[str, dict[int, float]] = {}
    for key, row in zip(result.keys, result.values.tolist(), strict=True):
        out[key] = {
            int(t): v for t, v in zip(result.timestamps.tolist(), row, strict=True) if not math.isnan(v)
        }
    return out


def prometheus_get(server: PrometheusServer, path: str, **params: str) -> Any:
    url = f"{server.url}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())["data"]


@pytest.mark.slow
def test_a_real_prometheus_remote_writes_its_samples_into_vhms(
    stack: Stack, tmp_path: Path, wait: Callable[..., None]
) -> None:
    port = free_port()
    prometheus = PrometheusServer(
        tmp_path / "prometheus", port, config=PROMETHEUS.format(port=port, url=stack.url)
    )
    prometheus.start()
    store = stack.vhms.store
    try:
        # three scrapes of prometheus_http_requests_total{handler="/metrics"} in Prometheus
        raw: dict[str, Any] = {}

        def scraped() -> bool:
            found = prometheus_get(
                prometheus, "/api/v1/query", query='prometheus_http_requests_total{handler="/metrics"}[1m]'
            )
            raw["series"] = found["result"]
            return bool(found["result"]) and len(found["result"][0]["values"]) >= 3

        wait(scraped, timeout=60, what="three scrapes in Prometheus")
        series = raw["series"][0]
        labels = dict(series["metric"])
        name = labels.pop("__name__")
        samples = [(round(float(t) * 1000), float(v)) for t, v in series["values"][:3]]
        first, last = samples[0][0], samples[-1][0]
        selector = name + "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"

        def arrived() -> bool:
            values = stored(store, selector, first - 1000, last + 1000)
            return len(values) == 1 and len(next(iter(values.values()))) >= 3

        wait(arrived, timeout=30, what="the same samples in VHMS")
        ((key, buckets),) = stored(store, selector, first - 1000, last + 1000).items()
        assert key.startswith(name + "{") and f"job={labels['job']}" in key
        # each sample in the bucket of its own time, with its value
        for timestamp, value in samples:
            assert buckets[timestamp // 1000 * 1000] == value

        # a gauge and the synthetic `up`, with every label Prometheus gave them
        wait(lambda: stored(store, f'up{{instance="127.0.0.1:{port}"}}', first, last + 10_000), what="up")
        up = stored(store, "up", first, last + 10_000)
        assert list(up) == [f"up{{instance=127.0.0.1:{port},job=prometheus}}"]
        assert set(next(iter(up.values())).values()) == {1.0}
        build = prometheus_get(prometheus, "/api/v1/query", query="prometheus_build_info")["result"][0][
            "metric"
        ]
        in_vhms = store.fetch("prometheus_build_info", first, last + 10_000, resolution=1).series()
        assert in_vhms == [
            ("prometheus_build_info", {k: v for k, v in build.items() if k != "__name__" and v})
        ]
        assert stack.counter("RequestRefusedCount") == 0
        assert stack.counter("EventAcceptedCount") >= 3
    finally:
        prometheus.stop()


def test_a_staleness_marker_keeps_its_bits_into_vhms(stack: Stack, wait: Callable[..., None]) -> None:
    stale = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]
    now_ms = now()
    body = write_request([({"__name__": "rw.stale"}, [(1.0, now_ms - 3000), (stale, now_ms - 1000)])])
    assert post(stack.url, body).status_code == 204
    wait(lambda: stored(stack.vhms.store, "rw.stale", now_ms - 4000, now_ms), what="rw.stale stored")
    result = stack.vhms.store.fetch("rw.stale", (now_ms - 3000) // 1000 * 1000, now_ms, resolution=1)
    bits = result.values.view(np.uint64)[0].tolist()
    assert (bits[0], bits[2]) == (0x3FF0000000000000, 0x7FF0000000000002)  # 1.0, then the marker


def test_samples_keep_their_time_and_empty_labels_are_dropped(
    stack: Stack, wait: Callable[..., None]
) -> None:
    now_ms = now()
    body = write_request(
        [
            (
                {"__name__": "rw.kept", "path": "/a", "empty": ""},
                [(1.5, now_ms - 3000), (2.5, now_ms - 2000)],
            ),
            ({"__name__": "rw.kept", "path": "/b"}, [(float("nan"), now_ms - 3000)]),
        ]
    )
    answer = post(stack.url, body)
    assert answer.status_code == 204, answer.text
    wait(lambda: len(stored(stack.vhms.store, "rw.kept", now_ms - 4000, now_ms)) == 2, what="rw.kept stored")
    kept = stored(stack.vhms.store, "rw.kept", now_ms - 4000, now_ms)
    assert kept == {
        "rw.kept{path=/a}": {(now_ms - 3000) // 1000 * 1000: 1.5, (now_ms - 2000) // 1000 * 1000: 2.5},
        "rw.kept{path=/b}": {},  # stored() leaves NaN out
    }


def now() -> int:
    return int(time.time() * 1000)


@pytest.mark.parametrize(
    ("body", "headers", "status", "why"),
    [
        (b"not snappy at all", {}, 400, "not snappy"),
        (
            bytes(cramjam.snappy.compress_raw(b"\xff\xff\xff garbage")),
            {},
            400,
            "not a prometheus.WriteRequest",
        ),
        (b"x" * 300_000, {}, 413, "maxBodySize"),
        (bytes(cramjam.snappy.compress_raw(b"\0" * 65_000)), {"Content-Encoding": "gzip"}, 415, "snappy"),
        (b"", {"Content-Type": "application/json"}, 415, "remote write 1.0 or"),
        (b"", {"Content-Type": "application/x-protobuf;proto=io.prometheus.write.v3.Request"}, 415, "v2"),
    ],
    ids=["not-snappy", "not-protobuf", "too-large", "gzip", "json", "unknown-proto"],
)
def test_garbage_is_refused_with_a_status_that_says_why(
    stack: Stack, body: bytes, headers: dict[str, str], status: int, why: str
) -> None:
    refused = stack.counter("RequestRefusedCount")
    answer = post(stack.url, body, **headers)
    assert answer.status_code == status
    assert why in answer.text
    assert stack.counter("RequestRefusedCount") == refused + 1


def test_a_label_that_is_not_a_label_message_refuses_the_request(stack: Stack) -> None:
    request = messages["WriteRequestView"]()
    request.timeseries.add(labels=[b"\x0a\xff"])  # a name whose length runs past the end
    answer = post(stack.url, bytes(cramjam.snappy.compress_raw(request.SerializeToString())))
    assert answer.status_code == 400
    assert "not a prometheus.WriteRequest: a label" in answer.text


def test_a_decompression_bomb_is_refused_before_it_is_decompressed(stack: Stack) -> None:
    bomb = bytes(cramjam.snappy.compress_raw(b"\0" * (4 * 1024 * 1024)))  # 21x, snappy's most
    liar = bytes([0x80, 0x80, 0x80, 0x64]) + bomb[4:1000]  # a header that declares 200 MiB
    for body in (bomb, liar):
        assert len(body) < 262144
        answer = post(stack.url, body)
        assert answer.status_code == 400
        assert "more than maxDecodedBytes=524,288" in answer.text


def test_too_many_samples_are_refused_and_bad_series_alone(stack: Stack, wait: Callable[..., None]) -> None:
    now_ms = now()
    many = write_request([({"__name__": "rw.many"}, [(1.0, now_ms - i) for i in range(5001)])])
    answer = post(stack.url, many)
    assert answer.status_code == 400 and "maxSamples" in answer.text

    refused = stack.counter("SeriesRefusedCount")
    mixed = write_request(
        [
            ({"__name__": "rw.good", "k": "v"}, [(7.0, now_ms - 1000)]),
            ({"job": "no-name"}, [(1.0, now_ms - 1000)]),
            ({"__name__": "0bad"}, [(1.0, now_ms - 1000)]),
            ({"__name__": "rw.label", "bad key": "v"}, [(1.0, now_ms - 1000)]),
        ]
    )
    answer = post(stack.url, mixed)
    assert answer.status_code == 400  # Prometheus drops it: the valid series are already stored
    assert "3 series refused" in answer.text and "1 samples stored" in answer.text
    assert "__name__" in answer.text and "'0bad'" in answer.text
    assert stack.counter("SeriesRefusedCount") == refused + 3
    wait(lambda: stored(stack.vhms.store, "rw.good", now_ms - 2000, now_ms), what="the good series stored")
    assert not stored(stack.vhms.store, "rw.label", now_ms - 2000, now_ms)


def test_a_slow_body_gets_408_and_the_server_stays_up(stack: Stack) -> None:
    def slow() -> Iterator[bytes]:
        yield b"\0"
        time.sleep(2)
        yield b"\0"

    answer = httpx.post(stack.url, content=slow(), headers={"Content-Encoding": "snappy"}, timeout=10)
    assert answer.status_code == 408
    assert stack.counter("ReadTimeoutCount") >= 1
    assert post(stack.url, write_request([])).status_code == 204


def test_a_full_channel_answers_503_so_prometheus_retries() -> None:
    small = start_stack(capacity=1)
    try:
        small.vhms.stop()  # the sink cannot deliver: the channel fills
        now_ms = now()
        first = write_request([({"__name__": "rw.full"}, [(1.0, now_ms)])])
        assert post(small.url, first).status_code == 204
        answer = post(small.url, write_request([({"__name__": "rw.full"}, [(2.0, now_ms + 1)])]))
        assert answer.status_code == 503 and "retry" in answer.text
        assert small.counter("ChannelWriteFail") == 1
    finally:
        small.agent.stop()
