"""The JSON answer of ``POST /api/v1/query``, written by columns.

Shape (docs/dsl.md)::

    {"series": [{"name": str, "labels": {str: str}, "timestamps": [int], "values": [float|null]}],
     "step_ms": int, "took_ms": float}
    {"scalar": float|null, "took_ms": float}

NaN and ±Inf are ``null`` (JSON has neither); label keys come sorted. No Python object is
made per series: every distinct name and label value is encoded once (orjson), the label
objects are joined per series by pyarrow's element-wise string kernels, the values of all
series are one orjson call over the matrix, split per series, and the records are one
buffer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from bookkeeper.ground import LabelColumn
from bookkeeper.wire import parse_series
from query_dsl.matrix import Matrix

__all__ = ["encode_answer", "strings_answer"]

_TEXT = pa.large_binary()


def _scalar(text: bytes) -> pa.Scalar:
    return pa.scalar(text, _TEXT)


def _per_series(column: LabelColumn, encode: list[bytes]) -> pa.Array:
    """The encoded value of each series (null where absent)."""
    codes = column.codes
    return pa.array(encode, _TEXT).take(pa.array(codes, mask=codes < 0))


def _labels(m: Matrix) -> pa.Array:
    """``"k":"v",...`` per series."""
    parts = []
    for label, column in m.table.columns.items():
        key = orjson.dumps(label) + b":"
        parts.append(_per_series(column, [key + orjson.dumps(value) + b"," for value in column.values]))
    if not parts:
        return pa.array([b""] * len(m), _TEXT)
    # "replace" and not "skip": skip drops the rows where every part is null (pyarrow 26)
    joined = pc.binary_join_element_wise(*parts, _scalar(b""), null_handling="replace", null_replacement="")
    return pc.binary_slice(joined, 0, -1)  # the last comma


def _values(m: Matrix) -> pa.Array:
    """The values of each series as JSON array contents, ``1.5,null,...``."""
    text = orjson.dumps(np.ascontiguousarray(m.values), option=orjson.OPT_SERIALIZE_NUMPY)
    rows = pc.list_flatten(pc.split_pattern(pa.array([text[2:-2]], _TEXT), b"],["))  # [[a,b],[c]]
    if len(rows) != len(m):
        raise RuntimeError(f"split {len(rows)} value rows for {len(m)} series")
    return rows


def strings_answer(strings: dict[str, tuple[int, str]]) -> list[dict[str, Any]]:
    """STRING series as the API answers them: name, labels, last value and its time."""
    out: list[dict[str, Any]] = []
    for key, (timestamp, value) in strings.items():
        name, labels = parse_series(key)
        out.append({"name": name, "labels": labels, "value": value, "timestamp": timestamp})
    return out


def encode_answer(
    result: Matrix | float,
    took_ms: float,
    warnings: list[str] | None = None,
    strings: dict[str, tuple[int, str]] | None = None,
) -> bytes:
    extra = {"warnings": warnings or [], "strings": strings_answer(strings or {})}
    if not isinstance(result, Matrix):
        return orjson.dumps({"scalar": result, "took_ms": took_ms, **extra})
    tail = (
        b'],"step_ms":'
        + orjson.dumps(result.step_ms)
        + b',"took_ms":'
        + orjson.dumps(took_ms)
        + b","
        + orjson.dumps(extra)[1:]
    )
    if not len(result):
        return b'{"series":[' + tail
    timestamps = orjson.dumps(np.ascontiguousarray(result.timestamps), option=orjson.OPT_SERIALIZE_NUMPY)
    names = result.table.names
    records = pc.binary_join_element_wise(
        _scalar(b'{"name":'),
        _per_series(names, [orjson.dumps(name) for name in names.values]),
        _scalar(b',"labels":{'),
        _labels(result),
        _scalar(b'},"timestamps":' + timestamps + b',"values":['),
        _values(result),
        _scalar(b"]},"),
        _scalar(b""),
    )
    offsets = np.frombuffer(records.buffers()[1], dtype=np.int64)
    data = memoryview(records.buffers()[2])
    body = data[offsets[records.offset] : offsets[records.offset + len(records)] - 1]  # the last comma
    return b"".join([b'{"series":[', body, tail])
