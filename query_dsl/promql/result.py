"""A PromQL answer and its form in Prometheus's HTTP API (the ``data`` object).

``result_type`` is ``matrix`` (a range query), ``vector`` (an instant query of an instant
vector), ``scalar`` or ``string``. Series without any value are left out; a range answer
is ordered by label set as Prometheus orders it, an instant vector too unless the query's
outermost function was ``sort``/``sort_desc`` (their order) or ``topk``/``bottomk`` (by
value). Values are written as Go writes them (``"1.5"``, ``"+Inf"``, ``"NaN"``), times as
seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from query_dsl.matrix import Matrix
from query_dsl.promql.labels import sort_key
from query_dsl.promql.values import Scalar, String

__all__ = ["PromQLResult", "format_value"]


def format_value(value: float) -> str:
    """Go's ``strconv.FormatFloat(v, 'f', -1, 64)`` with Prometheus's ``+Inf``/``-Inf``/``NaN``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return np.format_float_positional(value, trim="-")


def _seconds(ms: int) -> float | int:
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


@dataclass
class PromQLResult:
    """What :func:`~query_dsl.promql.instant_query` and ``range_query`` answer."""

    result_type: str
    value: Matrix | Scalar | String
    times: np.ndarray
    warnings: list[str] = field(default_factory=list)
    point_times: np.ndarray | None = None  # a range vector's own sample times, [series, points]
    order: str = "labels"  # labels, query (as sort() left it), descending or ascending (by value)

    def series(self) -> list[tuple[dict[str, str], list[tuple[int, float]]]]:
        """``(labels with __name__, [(time ms, value), ...])`` per series with a value, in
        the answer's order."""
        if not isinstance(self.value, Matrix):
            return []
        m = self.value
        out = []
        shared = m.timestamps.tolist()
        own = None if self.point_times is None else self.point_times.tolist()
        for index, (name, labels, row) in enumerate(zip(m.names, m.labels, m.values.tolist(), strict=True)):
            stamps = shared if own is None else own[index]
            points = [(int(t), v) for t, v in zip(stamps, row, strict=True) if v == v]
            if points:
                full = {"__name__": name, **labels} if name else dict(labels)
                out.append((full, points))
        if self.order == "labels" or self.result_type == "matrix":
            out.sort(key=lambda item: sort_key(item[0]))
        elif self.order in ("descending", "ascending"):
            out.sort(key=lambda item: item[1][-1][1], reverse=self.order == "descending")
        return out

    def to_prometheus_json(self) -> dict[str, Any]:
        """The ``data`` object of Prometheus's query API."""
        if isinstance(self.value, String):
            return {"resultType": "string", "result": [_seconds(int(self.times[-1])), self.value.value]}
        if isinstance(self.value, Scalar):
            return {
                "resultType": "scalar",
                "result": [_seconds(int(self.times[-1])), format_value(float(self.value.values[-1]))],
            }
        if self.result_type == "vector":
            return {
                "resultType": "vector",
                "result": [
                    {"metric": labels, "value": [_seconds(points[-1][0]), format_value(points[-1][1])]}
                    for labels, points in self.series()
                ],
            }
        return {
            "resultType": "matrix",
            "result": [
                {"metric": labels, "values": [[_seconds(t), format_value(v)] for t, v in points]}
                for labels, points in self.series()
            ],
        }
