"""Latency histograms in the bookkeeper: cumulative le buckets, _sum and _count as ordinary
variables, a consistent snapshot, refusals, and the same counts as prometheus_client's."""

from __future__ import annotations

import math
import threading

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client import Histogram as ClientHistogram

from bookkeeper import Bookkeeper, InvalidLabelError, InvalidValueError, VarType


def served(bk: Bookkeeper) -> dict[tuple[str, str | None], float]:
    """What a snapshot serves of the histogram: (name, le) -> value."""
    return {(s.name, s.labels.get("le")): s.value for s in bk.snapshot().samples()}


def test_buckets_sum_and_count_are_ordinary_variables() -> None:
    bk = Bookkeeper("api", environ={})
    latency = bk.histogram("rpc_seconds", buckets=(0.1, 0.5), method="get")
    for value in (0.05, 0.1, 0.3, 7.0):
        latency.observe(value)
    assert served(bk) == {
        ("rpc_seconds_bucket", "0.1"): 2,  # le: 0.1 itself is inside
        ("rpc_seconds_bucket", "0.5"): 3,
        ("rpc_seconds_bucket", "+Inf"): 4,
        ("rpc_seconds_sum", None): pytest.approx(7.45),
        ("rpc_seconds_count", None): 4,
    }
    types = {s.name: s.type for s in bk.snapshot().samples()}
    assert types == {
        "rpc_seconds_bucket": VarType.INTEGER,
        "rpc_seconds_sum": VarType.DOUBLE,
        "rpc_seconds_count": VarType.INTEGER,
    }
    assert all(s.labels["method"] == "get" for s in bk.snapshot().samples())
    assert bk.histogram("rpc_seconds", buckets=(0.1, 0.5), method="get") is latency  # cached
    assert latency.counts() == ([2, 3, 4], pytest.approx(7.45))
    assert bk.integer("rpc_seconds_count", method="get").get() == 4  # as the last snapshot wrote


def test_the_same_counts_as_prometheus_client() -> None:
    bounds = (0.005, 0.01, 0.1, 1.0, 2.5)
    bk = Bookkeeper("api", environ={})
    ours = bk.histogram("lat", buckets=bounds)
    theirs = ClientHistogram("lat", "latency", buckets=bounds, registry=CollectorRegistry())
    values = [0.0, -1.0, 0.005, 0.0050001, 0.01, 0.5, 1.0, 2.5, 3.0, math.inf, 1e9]
    for value in values:
        ours.observe(value)
        theirs.observe(value)
    (family,) = theirs.collect()
    expected = {
        (s.name, s.labels.get("le")): s.value for s in family.samples if not s.name.endswith("_created")
    }
    assert served(bk) == expected


def test_refusals_name_the_value() -> None:
    bk = Bookkeeper("api", environ={})
    with pytest.raises(InvalidValueError, match="increase strictly"):
        bk.histogram("a", buckets=(1, 1))
    with pytest.raises(InvalidValueError, match="at least one finite"):
        bk.histogram("a", buckets=(math.inf,))
    with pytest.raises(InvalidValueError, match="finite"):
        bk.histogram("a", buckets=(1, math.nan))
    with pytest.raises(InvalidLabelError, match="'le'"):
        bk.histogram("a", le="1")
    latency = bk.histogram("a", buckets=(1, 2))
    with pytest.raises(InvalidValueError, match="buckets"):
        bk.histogram("a", buckets=(1, 3))
    with pytest.raises(InvalidValueError, match="NaN"):
        latency.observe(math.nan)
    assert latency.counts() == ([0, 0, 0], 0.0)


def test_a_snapshot_is_a_consistent_cut_while_threads_observe() -> None:
    bk = Bookkeeper("api", environ={})
    latency = bk.histogram("lat", buckets=(1.0,))
    stop = threading.Event()

    def observe() -> None:
        while not stop.is_set():
            latency.observe(0.5)
            latency.observe(2.0)

    workers = [threading.Thread(target=observe) for _ in range(3)]
    for worker in workers:
        worker.start()
    try:
        for _ in range(200):
            values = served(bk)
            assert values[("lat_bucket", "+Inf")] == values[("lat_count", None)]
            assert values[("lat_sum", None)] == pytest.approx(
                0.5 * values[("lat_bucket", "1.0")]
                + 2.0 * (values[("lat_count", None)] - values[("lat_bucket", "1.0")])
            )
    finally:
        stop.set()
        for worker in workers:
            worker.join()
