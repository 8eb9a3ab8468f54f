"""The cross-check dataset: the same series for a real Prometheus (as OpenMetrics text for
``promtool tsdb create-blocks-from openmetrics``) and for VHMS (into a store, by
:func:`query_dsl.testing.load_store`), so that PromQL's answers can be compared
(tests/query_dsl/promql, docs/promql.md).

Every ``interval_s`` (15 s) for ``points`` samples ending at ``end_s``:

- ``http_requests_total{job, instance, method}``: 12 counters that reset now and then;
- ``cpu_temp_celsius{host[, rack]}``: 4 gauges, ``rack`` missing on two, one below zero,
  one with a 10-minute gap (longer than the 5-minute lookback);
- ``request_duration_seconds_bucket{job, le}``: cumulative ``le`` buckets up to ``+Inf``;
- ``idle_duration_seconds_bucket{le}``: a histogram that observes nothing (its buckets'
  rates are 0: every quantile is NaN);
- ``up{job, instance}``: 0 or 1;
- ``batch_last_success_timestamp_seconds{job}``: a series that stops at half time.

Each target is scraped at its own moment within the interval (a fixed offset per series,
plus up to 50 ms of jitter per scrape), as Prometheus scrapes; a ring whose step is the
interval keeps one sample per bucket, at its own time. Values and times come from a seeded
generator: the same every run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Series", "generate", "write_openmetrics"]


@dataclass(frozen=True)
class Series:
    name: str
    labels: dict[str, str]
    times_ms: np.ndarray
    values: np.ndarray


def generate(end_s: int, points: int = 480, interval_s: int = 15, seed: int = 17) -> list[Series]:
    """The dataset's series, their last sample at ``end_s`` (rounded down to the interval)."""
    rng = np.random.default_rng(seed)
    end = end_s // interval_s * interval_s
    grid = (end - interval_s * np.arange(points)[::-1]) * 1000
    out: list[Series] = []

    def scraped() -> np.ndarray:
        """The grid moved by this target's offset and each scrape's jitter (ms)."""
        offset = int(rng.integers(0, interval_s * 1000 - 100))
        return grid + offset + rng.integers(0, 50, points)

    for job in ("api", "web"):
        for instance in ("i0", "i1", "i2"):
            for method in ("GET", "POST"):
                steps = rng.integers(0, 12, points).astype(np.float64)
                counter = np.cumsum(steps)
                for reset in np.flatnonzero(rng.random(points) < 0.01):
                    counter[reset:] -= counter[reset] - rng.integers(0, 3)
                labels = {"job": job, "instance": instance, "method": method}
                out.append(Series("http_requests_total", labels, scraped(), counter))
            up = (rng.random(points) > 0.1).astype(np.float64)
            out.append(Series("up", {"job": job, "instance": instance}, scraped(), up))
    for index, host in enumerate(("h0", "h1", "h2", "h3")):
        base = 60.0 - 40 * index
        wave = base + 8 * np.sin(np.arange(points) / 20 + index) + rng.normal(0, 0.5, points)
        labels = {"host": host, **({"rack": f"r{index}"} if index < 2 else {})}
        keep = np.ones(points, dtype=bool)
        if host == "h3":
            keep[points // 2 : points // 2 + 600 // interval_s] = False
        out.append(Series("cpu_temp_celsius", labels, scraped()[keep], np.round(wave[keep], 3)))
    bounds = ("0.1", "0.5", "1", "+Inf")
    for job in ("api", "web"):
        rates = np.cumsum(rng.integers(0, 20, (points, len(bounds))), axis=0)
        cumulative = np.cumsum(np.cumsum(rates, axis=1), axis=0).astype(np.float64) / 10
        times = scraped()  # one scrape gives every bucket of a histogram
        for column, le in enumerate(bounds):
            labels = {"job": job, "le": le}
            out.append(Series("request_duration_seconds_bucket", labels, times, cumulative[:, column]))
    half = points // 2
    times = scraped()[:half]
    stamps = (times // 1000).astype(np.float64)
    out.append(Series("batch_last_success_timestamp_seconds", {"job": "batch"}, times, stamps))
    times = scraped()
    for le, count in (("0.1", 3.0), ("1", 5.0), ("+Inf", 6.0)):
        out.append(Series("idle_duration_seconds_bucket", {"le": le}, times, np.full(points, count)))
    return out


def _value(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def write_openmetrics(series: list[Series], path: Path) -> Path:
    """The series as OpenMetrics text (one gauge family per name), ending with ``# EOF``."""
    lines: list[str] = []
    by_name: dict[str, list[Series]] = {}
    for each in series:
        by_name.setdefault(each.name, []).append(each)
    for name, members in by_name.items():
        lines.append(f"# TYPE {name} gauge")
        for each in members:
            label_text = ",".join(f'{k}="{v}"' for k, v in sorted(each.labels.items()))
            for ms, value in zip(each.times_ms.tolist(), each.values.tolist(), strict=True):
                lines.append(f"{name}{{{label_text}}} {_value(value)} {ms / 1000:.3f}")
    lines.append("# EOF")
    path.write_text("\n".join(lines) + "\n")
    return path
