"""A stale marker ends a series (issue 32 B): the same samples, stale markers with their bits
(0x7ff0000000000002), remote-written into a real Prometheus and ingested into VHMS, answer
the same through Prometheus's HTTP API."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cramjam
import httpx
import numpy as np
import pytest

from artimon.servers import PrometheusServer
from bookkeeper.ground import BackgroundServer
from collector_agent.remote_write import messages
from query_dsl import Limits, create_app
from query_dsl.promql import instant_query
from vhms import LocalClient
from vhms.server import Store

from .test_promql_crosscheck import _get, _same

STALE = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]
M = "intermittent_metric"

# job a: 40 samples, a marker, then 8 minutes of silence (longer than the lookback) and 20
# samples; job b: 40 samples, a marker and new samples a minute later (within the lookback)
EXPRESSIONS = [
    M,
    f'{M}{{job="a"}} offset 1m',
    f"count({M})",
    f"sum by (job) ({M})",
    f"absent({M})",
    f'absent({M}{{job="a"}})',
    f"last_over_time({M}[5m])",
    f"count_over_time({M}[5m])",
    f"rate({M}[2m])",
    f"timestamp({M})",
    f"{M} > 10",
]


def _samples(base_ms: int) -> dict[str, list[tuple[float, int]]]:
    steady = [(float(k), base_ms + 15_000 * k) for k in range(40)]
    return {
        "a": [
            *steady,
            (STALE, base_ms + 15_000 * 40),
            *[(float(k), base_ms + 15_000 * k) for k in range(72, 92)],
        ],
        "b": [
            *steady,
            (STALE, base_ms + 15_000 * 40),
            *[(float(k), base_ms + 15_000 * k) for k in range(44, 92)],
        ],
    }


def _write_request(name: str, series: dict[str, list[tuple[float, int]]]) -> bytes:
    request = messages["WriteRequest"]()
    for job, samples in series.items():
        one = request.timeseries.add()
        one.labels.add(name="__name__", value=name)
        one.labels.add(name="job", value=job)
        for value, timestamp in samples:
            one.samples.add(value=value, timestamp=timestamp)
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


@contextmanager
def remote_written(
    name: str, series: dict[str, list[tuple[float, int]]], home: Path
) -> Iterator[tuple[str, str]]:
    """A real Prometheus that the samples (``{job: [(value, ms)]}`` of series ``name``, their
    bits kept) were remote-written to, and a query API over a store that ingested them: the
    base URLs of their Prometheus HTTP APIs."""
    store = Store("15s:1000")
    for job, samples in series.items():
        values = np.array([v for v, _ in samples])
        stamps = np.array([t for _, t in samples], dtype=np.int64)
        store.ingest([f"{name}{{job={job}}}"] * len(samples), values, stamps)
    with PrometheusServer(home, extra_args=("--web.enable-remote-write-receiver",)) as prometheus:
        answer = httpx.post(
            f"{prometheus.url}/api/v1/write",
            content=_write_request(name, series),
            headers={"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf"},
            timeout=10,
        )
        assert answer.status_code == 204, answer.text
        api = BackgroundServer(create_app(LocalClient(store), limits=Limits(timeout_s=10)), name="rw-api")
        api.start()
        try:
            yield prometheus.url, f"{api.url}/prometheus"
        finally:
            api.stop()


@pytest.fixture(scope="module")
def stale_bases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, int]]:
    base_ms = (int(time.time()) // 60 * 60 - 1800) * 1000 + 3_000
    with remote_written(M, _samples(base_ms), tmp_path_factory.mktemp("prometheus-rw")) as (theirs, ours):
        yield theirs, ours, base_ms // 1000


def test_every_ring_keeps_the_markers_bits_when_it_is_a_buckets_last_sample() -> None:
    store = Store("15s:100,60s:100")
    now = int(time.time()) // 60 * 60 * 1000
    store.ingest(["m{}", "m{}"], np.array([1.0, STALE]), np.array([now - 50_000, now - 20_000]))
    finest = store.fetch("m", now - 60_000, now, resolution=15).values.view(np.uint64).ravel()
    assert finest.tolist()[::2] == [np.float64(1.0).view(np.uint64), 0x7FF0000000000002]
    coarse = store.fetch("m", now - 60_000, now, resolution=60).values.view(np.uint64).ravel()
    assert coarse.tolist() == [0x7FF0000000000002]
    # a sample after the marker in the same bucket is the bucket's last again
    store.ingest(["m{}"], np.array([2.0]), np.array([now - 10_000]))
    assert store.fetch("m", now - 60_000, now, resolution=60).values.ravel().tolist() == [2.0]
    # min, max, sum, count and mean leave markers out
    # (a marker is a signalling NaN, whose fmax with a number is NaN: it is left out first)
    for aggregate in ("min", "max", "count", "sum", "mean"):
        other = Store(f"15s:100,60s:100:{aggregate}")
        other.ingest(["m{}", "m{}"], np.array([1.0, STALE]), np.array([now - 50_000, now - 20_000]))
        assert other.fetch("m", now - 60_000, now, resolution=60).values.ravel().tolist() == [1.0], aggregate
    # samples older than the finest ring: a marker fills an empty last bucket and stays (an
    # old sample only fills an empty one), and max leaves it out
    for spec, arrivals, expected in (
        ("15s:2,60s:100", ((STALE, now - 320_000), (1.0, now - 350_000)), STALE),
        ("15s:2,60s:100:max", ((1.0, now - 350_000), (STALE, now - 320_000)), 1.0),
    ):
        old = Store(spec)
        old.ingest(["m{}"], np.array([5.0]), np.array([now]))
        for value, at in arrivals:
            old.ingest(["m{}"], np.array([value]), np.array([at]))
        kept = old.fetch("m", now - 360_000, now - 300_000, resolution=60).values.view(np.uint64).ravel()
        assert kept.tolist() == [np.float64(expected).view(np.uint64)], spec


def test_a_marker_in_a_coarser_ring_ends_the_series() -> None:
    """The marker came while the finest ring (5 minutes) held it, in a batch of several
    polls (as remote write sends them: the coarser ring's bucket recomputed); ten minutes on,
    a lookback that far back reads the minute ring, finds the marker last and the series
    ended, as Prometheus does."""
    store = Store("5s:60,60s:60")
    base = (int(time.time()) // 60 - 20) * 60 * 1000
    polls = base + 5_000 * np.arange(41)  # a: 40 samples, then its marker at base + 200 s
    a = np.append(np.arange(40.0), STALE)
    store.ingest(["m{s=a}"] * 41 + ["m{s=b}"] * 41, np.concatenate([a, np.arange(41.0)]), np.tile(polls, 2))
    later = base + 5_000 * np.arange(41, 161)  # b goes on for ten more minutes
    store.ingest(["m{s=b}"] * 120, np.arange(41.0, 161.0), later)
    source = LocalClient(store)
    answer = instant_query(source, "m", (base + 250_000) / 1000)
    assert [item["metric"]["s"] for item in answer.to_prometheus_json()["result"]] == ["b"]
    assert any("60 s ring" in warning for warning in answer.warnings)
    before = instant_query(source, 'm{s="a"}', (base + 170_000) / 1000).to_prometheus_json()["result"]
    assert [item["value"][1] for item in before] == ["35"]  # the minute's last sample, at its start


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_a_stale_marker_ends_the_series(expression: str, stale_bases: tuple[str, str, int]) -> None:
    theirs, ours, base_s = stale_bases
    for at in (base_s + 590, base_s + 601, base_s + 640, base_s + 700, base_s + 1000, base_s + 1090):
        instant: dict[str, Any] = {"query": expression, "time": at}
        _same(_get(theirs, "query", instant), _get(ours, "query", instant), f"instant {expression} at {at}")
    for step in (15, 7):
        window = {"query": expression, "start": base_s - 60, "end": base_s + 1500, "step": step}
        _same(_get(theirs, "query_range", window), _get(ours, "query_range", window), f"range {expression}")
