"""The JSON text of an instant vector or a matrix in Prometheus's query API, written by
columns: no Python object per point (a raw matrix of 5,000 series x 11 samples made 55,000
``[t, "v"]`` lists, and their JSON cost more than the query).

Every distinct value and time is formatted once (:func:`value_texts`, ``time_texts``); each
point's ``[t,"v"]`` is then joined from those texts by pyarrow's element-wise kernels, a
series' points by a list join over the offsets of its samples, and the records
(``{"metric":{...},"values":[...]}``) by one more element-wise join, as
``query_dsl/http/answer.py`` writes the DSL's answers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from query_dsl.series_table import SeriesTable

__all__ = ["matrix_body", "vector_body"]

_TEXT = pa.large_binary()


def _literal(text: bytes) -> pa.Scalar:
    return pa.scalar(text, _TEXT)


def _seconds(ms: int) -> float | int:
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


def _binary(texts: list[bytes]) -> pa.Array:
    """``texts`` as a binary array, made from one joined buffer and its offsets (pyarrow's
    conversion of a list peaked at 12 MB for 3,000 short texts)."""
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=offsets[1:])
    return pa.Array.from_buffers(
        _TEXT, len(texts), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(texts))]
    )


def _coded(texts: list[bytes], codes: np.ndarray) -> pa.Array:
    """``texts[codes]`` as one binary array (null where a code is -1)."""
    return _binary(texts).take(pa.array(codes, mask=codes < 0))


def _metrics(table: SeriesTable) -> pa.Array:
    """``"__name__":"x","k":"v",...`` per series (labels sorted, the name first, an empty
    name and absent labels left out)."""
    names = table.names
    named = [b'"__name__":' + orjson.dumps(name) + b"," if name else b"" for name in names.values]
    parts = [_coded(named, names.codes)]
    for label in sorted(table.columns):
        column = table.columns[label]
        key = orjson.dumps(label) + b":"
        parts.append(_coded([key + orjson.dumps(value) + b"," for value in column.values], column.codes))
    # "replace" and not "skip": skip drops the rows where every part is null (pyarrow 26)
    joined = pc.binary_join_element_wise(*parts, _literal(b""), null_handling="replace", null_replacement="")
    return pc.binary_slice(joined, 0, -1)  # the last comma (none: an empty label set stays empty)


def _distinct_texts(values: np.ndarray, format_all: Callable[[np.ndarray], list[bytes]]) -> pa.Array:
    """Each of ``values`` (1-D) as ``format_all`` writes it, each distinct value formatted once."""
    floats = values.dtype == np.float64
    distinct, inverse = np.unique(values.view(np.uint64) if floats else values, return_inverse=True)
    if floats:  # by their bits: -0 is not 0, a NaN sample's NaN not another's
        distinct = distinct.view(np.float64)
    return _binary(format_all(distinct)).take(pa.array(inverse.reshape(-1)))


def _time_texts(times: np.ndarray) -> list[bytes]:
    """Times (ms) as seconds, as JSON writes them (``repr``: orjson's buffer per call peaked
    at 4 KB a text)."""
    return [repr(_seconds(t)).encode() for t in times.tolist()]


def _points(times: pa.Array, values: pa.Array) -> pa.Array:
    """``[t,"v"]`` per cell."""
    return pc.binary_join_element_wise(
        _literal(b"["), times, _literal(b',"'), values, _literal(b'"]'), _literal(b"")
    )


def _records(parts: list[pa.Array | pa.Scalar]) -> bytes:
    """The records joined, each ending in a comma, the last one's cut."""
    records = pc.binary_join_element_wise(*parts, _literal(b""))
    offsets = np.frombuffer(records.buffers()[1], dtype=np.int64)
    data = memoryview(records.buffers()[2])
    return bytes(data[offsets[records.offset] : offsets[records.offset + len(records)] - 1])


def vector_body(
    table: SeriesTable, time_ms: int, values: np.ndarray, value_texts: Callable[[np.ndarray], list[bytes]]
) -> bytes:
    """``{"resultType":"vector","result":[...]}`` of a value per series at ``time_ms``."""
    if not len(table):
        return b'{"resultType":"vector","result":[]}'
    stamp = orjson.dumps(_seconds(time_ms))
    body = _records(
        [
            _literal(b'{"metric":{'),
            _metrics(table),
            _literal(b'},"value":[' + stamp + b',"'),
            _distinct_texts(values, value_texts),
            _literal(b'"]},'),
        ]
    )
    return b'{"resultType":"vector","result":[' + body + b"]}"


def matrix_body(
    table: SeriesTable,
    times: np.ndarray,
    values: np.ndarray,
    kept: np.ndarray,
    value_texts: Callable[[np.ndarray], list[bytes]],
) -> bytes:
    """``{"resultType":"matrix","result":[...]}``: each series' points where ``kept``
    (``[series, points]``), at ``times`` (``[points]`` shared, or ``[series, points]`` each
    its own, ms). Every series has a point."""
    if not len(table):
        return b'{"resultType":"matrix","result":[]}'
    cells = np.flatnonzero(kept.reshape(-1))
    if times.ndim == 1:
        stamps = _binary(_time_texts(times)).take(pa.array(cells % kept.shape[1]))
    else:
        stamps = _distinct_texts(np.ascontiguousarray(times).reshape(-1)[cells], _time_texts)
    points = _points(stamps, _distinct_texts(np.ascontiguousarray(values).reshape(-1)[cells], value_texts))
    offsets = np.zeros(len(table) + 1, dtype=np.int64)
    np.cumsum(kept.sum(axis=1), out=offsets[1:])
    series = pc.binary_join(pa.LargeListArray.from_arrays(pa.array(offsets), points), _literal(b","))
    body = _records(
        [_literal(b'{"metric":{'), _metrics(table), _literal(b'},"values":['), series, _literal(b"]},")]
    )
    return b'{"resultType":"matrix","result":[' + body + b"]}"
