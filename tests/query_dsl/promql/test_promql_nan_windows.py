"""A NaN sample inside a range window is a sample (issue 32 A, the windows): the same samples,
some NaN (Go's ``math.NaN()``, bits 0x7ff8000000000001, as remote write carries them),
remote-written into a real Prometheus and ingested into VHMS, answer the same for every
function of a range vector, and for a subquery of NaN computed by the engine."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .test_promql_crosscheck import _get, _same
from .test_promql_staleness import remote_written

GO_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
M = "nan_metric"
FUNCTIONS = [
    "count_over_time",
    "sum_over_time",
    "avg_over_time",
    "min_over_time",
    "max_over_time",
    "stddev_over_time",
    "stdvar_over_time",
    "last_over_time",
    "present_over_time",
    "changes",
    "resets",
    "rate",
    "increase",
    "delta",
    "irate",
    "idelta",
    "deriv",
]
EXPRESSIONS = [
    M,
    *(f"{function}({M}[2m])" for function in FUNCTIONS),
    *(f"quantile_over_time({q}, {M}[2m])" for q in (0, 0.2, 0.5, 0.9, 1)),
    f"predict_linear({M}[2m], 60)",
    f"max_over_time(({M} * 1)[2m:15s])",
    f"sum_over_time(({M} / 0)[2m:15s])",
    f"count_over_time(({M} > 10)[2m:15s])",
]


def _samples(base_ms: int) -> dict[str, list[tuple[float, int]]]:
    """a: a counter with a NaN sample now and then; b: a gauge that is NaN for three minutes
    (windows of NaN only); c: never NaN; d: NaN throughout."""
    counter = [(float(k), base_ms + 15_000 * k) for k in range(60)]
    a = [(GO_NAN if k % 7 == 3 else value, at) for k, (value, at) in enumerate(counter)]
    b = [(GO_NAN if 20 <= k < 32 else (k * 37 % 11) - 5.0, base_ms + 15_000 * k) for k in range(60)]
    d = [(GO_NAN, base_ms + 15_000 * k) for k in range(60)]
    return {"a": a, "b": b, "c": counter, "d": d}


@pytest.fixture(scope="module")
def nan_bases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, int]]:
    base_ms = (int(time.time()) // 60 * 60 - 1800) * 1000 + 3_000
    with remote_written(M, _samples(base_ms), tmp_path_factory.mktemp("prometheus-nan")) as (theirs, ours):
        yield theirs, ours, base_ms // 1000


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_a_nan_sample_in_a_window_is_a_sample(expression: str, nan_bases: tuple[str, str, int]) -> None:
    theirs, ours, base_s = nan_bases
    for at in (base_s + 100, base_s + 301, base_s + 480, base_s + 700):
        instant: dict[str, Any] = {"query": expression, "time": at}
        _same(_get(theirs, "query", instant), _get(ours, "query", instant), f"instant {expression} at {at}")
    window = {"query": expression, "start": base_s - 60, "end": base_s + 1000, "step": 23}
    _same(_get(theirs, "query_range", window), _get(ours, "query_range", window), f"range {expression}")
