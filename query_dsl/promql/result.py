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

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from query_dsl.matrix import Matrix
from query_dsl.promql.body import matrix_body, vector_body
from query_dsl.promql.labels import prometheus_order
from query_dsl.promql.small_body import SMALL_CELLS, small_matrix_body, small_vector_body
from query_dsl.promql.values import Scalar, String, present

__all__ = ["PromQLResult", "format_value"]


# measured with tracemalloc (tests/query_dsl/test_budget.py), with some room
_CELL_BYTES = 24  # every [series, time] cell: its flags and flat indices
_POINT_BYTES = 500  # a point answered: its value's text as str and bytes (each distinct), its slots
_TIME_BYTES = 200  # an evaluation time: its number in seconds, shared by the rows
_SERIES_BYTES = 1000  # a series' label dict and its JSON


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

    def to_prometheus_body(self) -> bytes:
        """The JSON text of the ``data`` object of Prometheus's query API, written by
        columns (:mod:`query_dsl.promql.body`)."""
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
                return small_vector_body(table, int(m.timestamps[-1]), values[:, -1], _value_strs)
            return vector_body(table, int(m.timestamps[-1]), values[:, -1], _value_texts)
        times = m.timestamps if self.point_times is None else self.point_times[rows]
        if small:
            return small_matrix_body(table, times, values, kept, _value_strs)
        return matrix_body(table, times, values, kept, _value_texts)

    def to_prometheus_json(self) -> dict[str, Any]:
        """The ``data`` object of Prometheus's query API (:meth:`to_prometheus_body` decoded)."""
        data: dict[str, Any] = orjson.loads(self.to_prometheus_body())
        return data


def _value_texts(values: np.ndarray) -> list[bytes]:
    """:func:`format_value` of each of ``values``, as bytes."""
    return [text.encode() for text in _texts(values)]


def _value_strs(values: np.ndarray) -> list[str]:
    """:func:`format_value` of each of ``values``."""
    return _texts(values)


def _numbers(values: np.ndarray) -> str:
    """orjson's text of ``values`` (int64, or float64 that are not whole), comma-separated."""
    text: str = orjson.dumps(np.ascontiguousarray(values), option=orjson.OPT_SERIALIZE_NUMPY).decode()
    return text[1:-1]


def _integers(values: np.ndarray) -> list[str]:
    """``str`` of each of ``values`` (whole, |v| < 10^16) as an integer."""
    return _numbers(values.astype(np.int64)).split(",") if len(values) else []


def _fractions(values: np.ndarray) -> list[str]:
    """``repr`` of each of ``values`` (not whole, 10^-4 <= |v| < 10^16): orjson's shortest
    round-trip text, which is Python's there (checked on millions of values; an exponent,
    which neither writes in that range, sends them to ``repr``), at a quarter of its cost."""
    if not len(values):
        return []
    text = _numbers(values)
    if "e" in text:
        return list(map(repr, values.tolist()))
    return text.split(",")


def _texts(values: np.ndarray) -> list[str]:
    """:func:`format_value` of each of ``values``, by C loops where Go's text is Python's:
    ``str`` of the integer for a whole number, ``repr`` for another without an exponent
    (10^-4 <= |v| < 10^16), both written by orjson over the array; numpy's positional
    formatting for the rest (NaN, infinities, -0, exponents)."""
    magnitude = np.abs(values)
    with np.errstate(invalid="ignore"):
        plain = ((magnitude >= 1e-4) & (magnitude < 1e16)) | ((values == 0) & ~np.signbit(values))
        whole = plain & (values == np.trunc(values))
    fraction = plain & ~whole
    if whole.all():
        return _integers(values)
    if fraction.all():
        return _fractions(values)
    out = np.empty(len(values), dtype=object)
    out[whole] = _integers(values[whole])
    out[fraction] = _fractions(values[fraction])
    rest = ~plain
    out[rest] = [format_value(v) for v in values[rest].tolist()]
    texts: list[str] = out.tolist()
    return texts


def _metrics(m: Matrix, rows: np.ndarray) -> list[dict[str, str]]:
    """The label sets of ``rows``, the name as ``__name__`` where there is one."""
    picked = m.select(rows)
    return [
        {"__name__": name, **labels} if name else dict(labels)
        for name, labels in zip(picked.names, picked.labels, strict=True)
    ]
