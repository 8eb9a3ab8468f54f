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
from query_dsl.promql.small_body import SMALL_CELLS, metric_texts, small_matrix_body, small_vector_body
from query_dsl.promql.texts import format_value, value_strs
from query_dsl.promql.values import Scalar, String, present
from query_dsl.text_rows import RowsText

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
    _cells: tuple[np.ndarray | None] | None = field(default=None, init=False, repr=False, compare=False)

    def _rows(self) -> tuple[Matrix, np.ndarray]:
        """The matrix and its rows with a value, in the answer's order."""
        m, rows, _, _ = self._answer_rows()
        return m, rows

    def _present(self) -> np.ndarray | None:
        """Where the matrix holds a sample (``present``), None when every cell does (the
        usual answer of series scraped throughout: nothing to pick); made once."""
        if self._cells is None:
            assert isinstance(self.value, Matrix)  # callers checked
            values = self.value.values
            self._cells = (present(values),) if np.count_nonzero(np.isnan(values)) else (None,)
        return self._cells[0]

    def _answer_rows(self) -> tuple[Matrix, np.ndarray, np.ndarray | None, bool]:
        """``_rows``, the cells of the rows that hold a sample (``present``, ``[rows, times]``;
        None when every cell holds one), and whether the rows are every row in the matrix's
        own order (known once per table when they are its Prometheus order)."""
        assert isinstance(self.value, Matrix)  # callers checked
        m = self.value
        kept = self._present()
        held = None if kept is None else kept.any(axis=1)
        if held is None or bool(held.all()):
            if self.order == "labels" or self.result_type == "matrix":
                rows = prometheus_order(m)
                own = m.table.derived("prometheus_order_is_own", lambda _: _ascending(rows))
                return m, rows, None if kept is None else kept[rows], own
            rows = np.arange(len(m))
        else:
            rows = np.flatnonzero(held)
            if self.order == "labels" or self.result_type == "matrix":  # the table's order (made
                # once per table), those held picked: the order of a part is the whole's
                everyone = prometheus_order(m)
                rows = everyone[np.asarray(held)[everyone]]
        if self.order in ("descending", "ascending"):
            last = m.values[rows, -1]
            rows = rows[np.argsort(-last if self.order == "descending" else last, kind="stable")]
        own = len(rows) == len(m) and _ascending(rows)
        return m, rows, None if kept is None else kept[rows], own

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
        kept = self._present()
        points = m.values.size if kept is None else int(kept.sum())
        shared = len(m.timestamps) * _TIME_BYTES
        return shared + m.values.size * _CELL_BYTES + points * _POINT_BYTES + len(m) * _SERIES_BYTES

    def to_prometheus_body(self) -> bytes | memoryview:
        """The JSON text of the ``data`` object of Prometheus's query API, written by
        columns (:mod:`query_dsl.promql.body`; a wide one as a view of the buffer it was
        written in)."""
        text = self.prometheus_text()
        return text if isinstance(text, bytes) else text.whole()

    def prometheus_text(self) -> bytes | RowsText:
        """:meth:`to_prometheus_body`'s text, a wide one laid out and not yet written (to be
        written whole or a block at a time: the query API sends a wide answer as it writes
        it)."""
        if isinstance(self.value, String):
            return orjson.dumps(
                {"resultType": "string", "result": [_seconds(int(self.times[-1])), self.value.value]}
            )
        if isinstance(self.value, Scalar):
            value = format_value(float(self.value.values[-1]))
            return orjson.dumps({"resultType": "scalar", "result": [_seconds(int(self.times[-1])), value]})
        m, rows, kept, in_order = self._answer_rows()
        values = m.values if in_order else m.values[rows]
        times = m.timestamps if self.point_times is None else self.point_times[rows]
        if values.size > SMALL_CELLS:  # the columnar writer: its fixed costs are paid off there
            table = m.table if in_order else m.table.take(rows)
            if self.result_type == "vector":
                return vector_body(table, int(m.timestamps[-1]), values[:, -1])
            return matrix_body(
                table, times, values, np.ones(values.shape, dtype=bool) if kept is None else kept
            )
        metrics = metric_texts(m.table)
        if not in_order:
            metrics = [metrics[row] for row in rows.tolist()]
        if self.result_type == "vector":
            return small_vector_body(metrics, int(m.timestamps[-1]), values[:, -1], value_strs)
        return small_matrix_body(metrics, times, values, kept, value_strs, m.table if in_order else None)

    def to_prometheus_json(self) -> dict[str, Any]:
        """The ``data`` object of Prometheus's query API (:meth:`to_prometheus_body` decoded)."""
        data: dict[str, Any] = orjson.loads(self.to_prometheus_body())
        return data


def _ascending(rows: np.ndarray) -> bool:
    """Whether ``rows`` run 0, 1, 2, ... (every row, in its own order)."""
    return not (np.diff(rows) != 1).any()


def _metrics(m: Matrix, rows: np.ndarray) -> list[dict[str, str]]:
    """The label sets of ``rows``, the name as ``__name__`` where there is one."""
    picked = m.select(rows)
    return [
        {"__name__": name, **labels} if name else dict(labels)
        for name, labels in zip(picked.names, picked.labels, strict=True)
    ]
