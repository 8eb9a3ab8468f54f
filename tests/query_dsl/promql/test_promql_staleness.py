"""A stale marker ends a series (issue 32 B): the same samples, stale markers with their bits
(0x7ff0000000000002), remote-written into a real Prometheus and ingested into VHMS, answer
the same through Prometheus's HTTP API."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
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


def _write_request(series: dict[str, list[tuple[float, int]]]) -> bytes:
    request = messages["WriteRequest"]()
    for job, samples in series.items():
        one = request.timeseries.add()
        one.labels.add(name="__name__", value=M)
        one.labels.add(name="job", value=job)
        for value, timestamp in samples:
            one.samples.add(value=value, timestamp=timestamp)
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


@pytest.fixture(scope="module")
def stale_bases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, int]]:
    base_ms = (int(time.time()) // 60 * 60 - 1800) * 1000 + 3_000
    series = _samples(base_ms)
    store = Store("15s:1000")
    for job, samples in series.items():
        values = np.array([v for v, _ in samples])
        stamps = np.array([t for _, t in samples], dtype=np.int64)
        store.ingest([f"{M}{{job={job}}}"] * len(samples), values, stamps)
    home: Path = tmp_path_factory.mktemp("prometheus-rw")
    with PrometheusServer(home, extra_args=("--web.enable-remote-write-receiver",)) as prometheus:
        answer = httpx.post(
            f"{prometheus.url}/api/v1/write",
            content=_write_request(series),
            headers={"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf"},
            timeout=10,
        )
        assert answer.status_code == 204, answer.text
        api = BackgroundServer(create_app(LocalClient(store), limits=Limits(timeout_s=10)), name="stale-api")
        api.start()
        try:
            yield prometheus.url, f"{api.url}/prometheus", base_ms // 1000
        finally:
            api.stop()


def test_the_finest_ring_keeps_the_markers_bits_and_a_coarser_one_its_last_value() -> None:
    store = Store("15s:100,60s:100")
    now = int(time.time()) // 60 * 60 * 1000
    store.ingest(["m{}", "m{}"], np.array([1.0, STALE]), np.array([now - 50_000, now - 20_000]))
    finest = store.fetch("m", now - 60_000, now, resolution=15).values.view(np.uint64).ravel()
    assert finest.tolist()[::2] == [np.float64(1.0).view(np.uint64), 0x7FF0000000000002]
    assert store.fetch("m", now - 60_000, now, resolution=60).values.ravel().tolist() == [1.0]


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_a_stale_marker_ends_the_series(expression: str, stale_bases: tuple[str, str, int]) -> None:
    theirs, ours, base_s = stale_bases
    for at in (base_s + 590, base_s + 601, base_s + 640, base_s + 700, base_s + 1000, base_s + 1090):
        instant: dict[str, Any] = {"query": expression, "time": at}
        _same(_get(theirs, "query", instant), _get(ours, "query", instant), f"instant {expression} at {at}")
    for step in (15, 7):
        window = {"query": expression, "start": base_s - 60, "end": base_s + 1500, "step": step}
        _same(_get(theirs, "query_range", window), _get(ours, "query_range", window), f"range {expression}")
