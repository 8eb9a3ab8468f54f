"""The query API's own ``/metrics``: how long queries take, and the process it runs in.

A latency histogram kept in a bookkeeper of its own (``bk.histogram``:
``artimon_query_seconds_bucket{le=...,outcome=ok|error}``, ``_sum``, ``_count``), written
in the Prometheus text format with prometheus_client's process metrics
(``process_resident_memory_bytes``, ``process_cpu_seconds_total``...), so that a
``prometheus`` source (``artimon up``'s) collects both into VHMS, and ``histogram_quantile``
reads the latencies back; and the memory budget all queries share (:class:`BudgetMetrics`:
``artimon_query_budget_bytes``, ``artimon_query_budget_in_use_bytes``, its peak, the
charges that waited and those refused with a 503); and where the requests of Prometheus's API
ran (:class:`PlacementMetrics`: ``artimon_query_inline_runs``, ``artimon_query_pool_runs``,
``artimon_query_inline_given_up``; :mod:`query_dsl.http.placement`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Protocol

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from bookkeeper import Bookkeeper, Histogram
from query_dsl.budget import MemoryBudget
from query_dsl.http.placement import Placement

__all__ = ["ApiMetrics", "BudgetMetrics", "Collector", "PlacementMetrics", "metrics_app"]

log = logging.getLogger(__name__)

# 1 ms to 30 s: a query answers in milliseconds, its deadline is seconds
QUERY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Collector(Protocol):
    """What prometheus_client's ``generate_latest`` reads: metric families."""

    def collect(self) -> Iterable[Metric]: ...


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class ApiMetrics:
    """Latencies observed by the API's routes, and their exposition."""

    def __init__(self, extra: Sequence[Collector] = ()) -> None:
        self.extra = list(extra)  # what else runs in the process
        self.bookkeeper = Bookkeeper("artimon.api", labels={}, environ={})
        self._process = CollectorRegistry()
        ProcessCollector(registry=self._process)
        self._latency: dict[str, Histogram] = {
            outcome: self.bookkeeper.histogram(
                "artimon_query_seconds", buckets=QUERY_BUCKETS, outcome=outcome
            )
            for outcome in ("ok", "error")
        }

    def observe(self, seconds: float, ok: bool) -> None:
        self._latency["ok" if ok else "error"].observe(seconds)

    def text(self) -> str:
        """The Prometheus text exposition: the histograms, the process, then the extra
        collectors' (one that fails is left out, logged: the rest still answers)."""
        lines = ["# TYPE artimon_query_seconds histogram"]
        for sample in self.bookkeeper.snapshot().samples():
            own = sorted(
                (k, v) for k, v in sample.labels.items() if k in ("le", "outcome")
            )  # no framework labels
            labels = ",".join(f'{key}="{_quote(value)}"' for key, value in own)
            lines.append(f"{sample.name}{{{labels}}} {float(sample.value)!r}")
        return "\n".join(lines) + "\n" + exposition([self._process, *self.extra])


class BudgetMetrics:
    """A :class:`MemoryBudget`'s figures, as a collector."""

    def __init__(self, budget: MemoryBudget) -> None:
        self.budget = budget

    def collect(self) -> Iterable[Metric]:
        budget = self.budget
        yield GaugeMetricFamily(
            "artimon_query_budget_bytes", "bytes all queries may hold at once", value=budget.max_bytes
        )
        yield GaugeMetricFamily(
            "artimon_query_budget_in_use_bytes", "bytes the running queries hold", value=budget.in_use
        )
        yield GaugeMetricFamily(
            "artimon_query_budget_peak_bytes", "the most the queries held at once", value=budget.peak
        )
        yield CounterMetricFamily(
            "artimon_query_budget_waits", "charges that waited for other queries' bytes", value=budget.waits
        )
        yield CounterMetricFamily(
            "artimon_query_budget_refusals", "charges refused after waiting (503)", value=budget.refusals
        )


class PlacementMetrics:
    """A :class:`Placement`'s counts, as a collector."""

    def __init__(self, placement: Placement) -> None:
        self.placement = placement

    def collect(self) -> Iterable[Metric]:
        placement = self.placement
        yield CounterMetricFamily(
            "artimon_query_inline_runs", "requests run on the event loop", value=placement.inline_runs
        )
        yield CounterMetricFamily(
            "artimon_query_pool_runs", "requests run in the thread pool", value=placement.pool_runs
        )
        yield CounterMetricFamily(
            "artimon_query_inline_given_up",
            "requests given up on the event loop past its leash, then run in the pool",
            value=placement.given_up,
        )


def exposition(collectors: Sequence[Collector]) -> str:
    """The Prometheus text of ``collectors``; one that fails is left out and logged, so that
    the others still answer."""
    text = ""
    for collector in collectors:
        try:
            text += generate_latest(collector).decode()
        except Exception:  # one collector's failure must not hide the others
            log.exception("a /metrics collector failed")
    return text


def metrics_app(component: str, collectors: Sequence[Collector]) -> FastAPI:
    """The ``/metrics`` (the process's figures, then ``collectors``') and ``/health`` of a
    long-running command without an HTTP API of its own (``artimon alerts``, ``artimon
    spark``), for a ``prometheus`` source to scrape."""
    process = CollectorRegistry()
    ProcessCollector(registry=process)
    app = FastAPI(title=f"Artimon {component}: metrics", openapi_url=None, docs_url=None, redoc_url=None)

    @app.get("/metrics")
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(exposition([process, *collectors]), media_type="text/plain; version=0.0.4")

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "component": component}

    return app
