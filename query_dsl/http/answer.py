"""The JSON answer of ``POST /api/v1/query``, written by columns.

Shape (docs/dsl.md)::

    {"series": [{"name": str, "labels": {str: str}, "timestamps": [int], "values": [float|null]}],
     "step_ms": int, "took_ms": float}
    {"scalar": float|null, "took_ms": float}

NaN and ±Inf are ``null`` (JSON has neither); label keys come sorted. No Python object is
made per series: every distinct name and label value is encoded once (orjson), the values
of all series are one orjson call over the matrix, and the records are rows of text
(:class:`query_dsl.text_rows.TextRows`) picking a series' name, labels and values' row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from bookkeeper.wire import parse_series
from query_dsl.matrix import Matrix
from query_dsl.text_rows import Dictionary, TextRows, dictionary

__all__ = ["encode_answer", "strings_answer"]


def _labels(m: Matrix, rows: TextRows) -> None:
    """``"k":"v",...`` per series: a field per label, with a leading comma but the first a
    series has."""
    seen = np.zeros(len(m), dtype=bool)  # the series that have a label already
    for label, column in m.table.columns.items():
        key = orjson.dumps(label) + b":"
        texts = [key + orjson.dumps(value) for value in column.values]
        present = column.codes >= 0
        picks = np.where(present, column.codes, -1)
        picks[seen & present] += len(texts)
        seen |= present
        rows.pick(dictionary(texts + [b"," + text for text in texts]), picks)


def _values(m: Matrix) -> Dictionary:
    """The values of each series as JSON array contents, ``1.5,null,...``: one orjson text
    of the matrix (``[[a,b],[c,d]]``), its rows picked where they lie."""
    text = np.frombuffer(
        orjson.dumps(np.ascontiguousarray(m.values), option=orjson.OPT_SERIALIZE_NUMPY), dtype=np.uint8
    )
    ends = np.flatnonzero(text == ord("]"))[:-1]  # a row's end (no value holds a "]"), then the text's
    if len(ends) != len(m):
        raise RuntimeError(f"split {len(ends)} value rows for {len(m)} series")
    starts = np.empty(len(ends), dtype=np.int64)
    starts[0], starts[1:] = 2, ends[:-1] + 3  # after "[[", then after "],["
    return Dictionary(text, starts, ends - starts)


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
    rows = TextRows(len(result))
    rows.constant(b'{"name":')
    rows.pick(dictionary([orjson.dumps(name) for name in names.values]), names.codes)
    rows.constant(b',"labels":{')
    _labels(result, rows)
    rows.constant(b'},"timestamps":' + timestamps + b',"values":[')
    rows.pick(_values(result), np.arange(len(result)))
    rows.constant(b"]}")
    return bytes(rows.join(b'{"series":[', b",", tail)[0])
