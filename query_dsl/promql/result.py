"""A PromQL answer and its form in Prometheus's HTTP API (the ``data`` object).

``result_type`` is ``matrix`` (a range query), ``vector`` (an instant query of an instant
vector), ``scalar`` or ``string``. Series without any sample are left out (a sample whose
value is NaN is a sample, written ``"NaN"``); a range answer
is ordered by label set as Prometheus orders it, an instant vector too unless the query's
outermost function was ``sort``/``sort_desc`` (their order) or ``topk``/``bottomk`` (by
value). Values are written as Go writes them (``"1.5"``, ``"+Inf"``, ``"NaN"``), times as
seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from query_dsl.matrix import Matrix
from query_dsl.promql.body import matrix_body, vector_body
from query_dsl.promql.labels import prometheus_order
from query_dsl.promql.small_body import SMALL_CELLS, small_matrix_body, small_vector_body
from query_dsl.promql.texts import format_value, value_strs
from query_dsl.promql.values import Scalar, String, present

__all__ = ["PromQLResult", "format_value"]


# measured with tracemalloc (tests/query_dsl/test_budget.py), with some room
_CELL_BYTES = 24  # every [series, time] cell: its flags and flat indices
_POINT_BYTES = 500  # a point answered: its value's text as str and bytes (each distinct), its slots
_TIME_BYTES = 200  # an evaluation time: its number in seconds, shared by the rows
_SERIES_BYTES = 1000  # a series' label dict and its JSON


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

    def _rows(self) -> tuple[Matrix, np.ndarray]:
        """The matrix and its rows with a value, in the answer's order."""
        m, rows, _ = self._answer_rows()
        return m, rows

    def _answer_rows(self) -> tuple[Matrix, np.ndarray, np.ndarray]:
        """``_rows`` and the cells of the rows that hold a sample (``present``, ``[rows, times]``)."""
        assert isinstance(self.value, Matrix)  # callers checked
        m = self.value
        kept = present(m.values)
        held = kept.any(axis=1)
        every = bool(held.all())
        rows = np.arange(len(m)) if every else np.flatnonzero(held)
        if self.order == "labels" or self.result_type == "matrix":
            rows = rows[prometheus_order(m if every else m.select(rows))]
        elif self.order in ("descending", "ascending"):
            last = m.values[rows, -1]
            rows = rows[np.argsort(-last if self.order == "descending" else last, kind="stable")]
        return m, rows, kept[rows]

    def series(self) -> list[tuple[dict[str, str], list[tuple[int, float]]]]:
        """``(labels with __name__, [(time ms, value), ...])`` per series with a value, in
        the answer's order."""
        if not isinstance(self.value, Matrix):
            return []
        m, rows = self._rows()
        own = None if self.point_times is None else self.point_times[rows].tolist()
        shared = m.timestamps.tolist()
        values = m.values[rows]
        kept = present(values).tolist()
        out = []
        for index, (labels, row) in enumerate(zip(_metrics(m, rows), values.tolist(), strict=True)):
            stamps = shared if own is None else own[index]
            points = zip(stamps, row, kept[index], strict=True)
            out.append((labels, [(int(t), v) for t, v, ok in points if ok]))
        return out

    def answer_bytes(self) -> int:
        """An estimate of what :meth:`to_prometheus_json` and its JSON text make (before it
        makes them): the times, texts and flags per cell, a list and slots per point, a
        label dict per series."""
        if not isinstance(self.value, Matrix):
            return _SERIES_BYTES
        m = self.value
        points = int(present(m.values).sum())
        shared = len(m.timestamps) * _TIME_BYTES
        return shared + m.values.size * _CELL_BYTES + points * _POINT_BYTES + len(m) * _SERIES_BYTES

    def to_prometheus_body(self) -> bytes | memoryview:
        """The JSON text of the ``data`` object of Prometheus's query API, written by
        columns (:mod:`query_dsl.promql.body`; a wide one as a view of the buffer it was
        gathered in)."""
        if isinstance(self.value, String):
            return orjson.dumps(
                {"resultType": "string", "result": [_seconds(int(self.times[-1])), self.value.value]}
            )
        if isinstance(self.value, Scalar):
            value = format_value(float(self.value.values[-1]))
            return orjson.dumps({"resultType": "scalar", "result": [_seconds(int(self.times[-1])), value]})
        m, rows, kept = self._answer_rows()
        in_order = len(rows) == len(m) and not (np.diff(rows) != 1).any()
        table, values = (m.table, m.values) if in_order else (m.table.take(rows), m.values[rows])
        small = values.size <= SMALL_CELLS  # joined in Python: pyarrow's kernels cost more there
        if self.result_type == "vector":
            if small:
                return small_vector_body(table, int(m.timestamps[-1]), values[:, -1], value_strs)
            return vector_body(table, int(m.timestamps[-1]), values[:, -1])
        times = m.timestamps if self.point_times is None else self.point_times[rows]
        if small:
            return small_matrix_body(table, times, values, kept, value_strs)
        return matrix_body(table, times, values, kept)

    def to_prometheus_json(self) -> dict[str, Any]:
        """The ``data`` object of Prometheus's query API (:meth:`to_prometheus_body` decoded)."""
        data: dict[str, Any] = orjson.loads(self.to_prometheus_body())
        return data


def _metrics(m: Matrix, rows: np.ndarray) -> list[dict[str, str]]:
    """The label sets of ``rows``, the name as ``__name__`` where there is one."""
    picked = m.select(rows)
    return [
        {"__name__": name, **labels} if name else dict(labels)
        for name, labels in zip(picked.names, picked.labels, strict=True)
    ]
