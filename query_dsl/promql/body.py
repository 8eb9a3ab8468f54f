"""The JSON text of an instant vector or a matrix in Prometheus's query API, written by
columns: no Python object per point (a raw matrix of 5,000 series x 11 samples made 55,000
``[t, "v"]`` lists, and their JSON cost more than the query).

The answer is gathered from a dictionary of pieces in one take (pyarrow's, over a binary
array: the taken array's buffer is the text): constants (``{"metric":{``, ``},"values":[``...),
each label value as ``"k":"v"`` (with a leading comma too), each time as ``[t,"`` (and
``"],[t,"`` after a point) and each value's text (:func:`query_dsl.promql.texts.value_texts`,
one buffer for all). A series is a row of piece ids (its opening, its labels, its points,
its end), the pieces it lacks (an absent label, a point not kept) masked out; the rows
flattened are the answer's pieces in order.
"""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from query_dsl.promql.texts import Texts, second_texts, value_texts
from query_dsl.series_table import SeriesTable

__all__ = ["matrix_body", "vector_body"]

_TEXT = pa.large_binary()


def _array(texts: Texts) -> pa.Array:
    return pa.Array.from_buffers(
        _TEXT, len(texts), [None, pa.py_buffer(texts.offsets), pa.py_buffer(texts.data)]
    )


def _constants(*texts: bytes) -> pa.Array:
    return pa.array(texts, _TEXT)


def _wrapped(texts: pa.Array, prefix: bytes, suffix: bytes) -> pa.Array:
    """``prefix + text + suffix`` of each of ``texts``."""
    return pc.binary_join_element_wise(
        pa.scalar(prefix, _TEXT), texts, pa.scalar(suffix, _TEXT), pa.scalar(b"", _TEXT)
    )


class _Pieces:
    """The dictionary an answer is gathered from, block by block (:meth:`add` answers a
    block's first id)."""

    def __init__(self) -> None:
        self._blocks: list[pa.Array] = []
        self._size = 0

    def add(self, block: pa.Array) -> int:
        first = self._size
        self._blocks.append(block)
        self._size += len(block)
        return first

    def gather(self, ids: np.ndarray) -> memoryview:
        """The pieces ``ids``, one after another (a view of the taken array's buffer)."""
        taken = pa.concat_arrays(self._blocks).take(pa.array(ids))
        offsets = np.frombuffer(taken.buffers()[1], dtype=np.int64)
        text = memoryview(taken.buffers()[2]).cast("B")  # pyarrow's views are of signed chars ("b")
        return text[offsets[taken.offset] : offsets[taken.offset + len(taken)]]


class _Rows:
    """A row of piece ids per series, filled block by block of columns (:meth:`block`), and
    where a series has each piece (everywhere until :meth:`mask` says otherwise)."""

    def __init__(self, size: int, width: int) -> None:
        self.ids = np.empty((size, width), dtype=np.int64)
        self._has: np.ndarray | None = None
        self._next = 0

    def block(self, width: int) -> slice:
        """The next ``width`` columns."""
        columns = slice(self._next, self._next + width)
        self._next += width
        return columns

    def mask(self, columns: slice, has: np.ndarray) -> None:
        if self._has is None:
            self._has = np.ones(self.ids.shape, dtype=bool)
        self._has[:, columns] = has

    def flat(self) -> np.ndarray:
        """The ids the series have, row after row."""
        return self.ids.reshape(-1) if self._has is None else self.ids[self._has]


def _firsts(has: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cells ``(rows, columns)`` of each row's first ``has``."""
    return np.arange(len(has)), np.argmax(has, axis=1)


def _constant(rows: _Rows, piece: int) -> None:
    rows.ids[:, rows.block(1)] = piece


def _opening(rows: _Rows, pieces: _Pieces, head: bytes) -> None:
    """``head`` and ``{"metric":{`` for the first series, ``,{"metric":{`` for the others."""
    first = pieces.add(_constants(head + b'{"metric":{', b',{"metric":{'))
    column = rows.block(1)
    rows.ids[:, column] = first + 1
    rows.ids[0, column] = first


def _labels(table: SeriesTable, rows: _Rows, pieces: _Pieces) -> None:
    """Each series' label pieces: the name first, then the labels sorted, each ``"k":"v"``,
    with a leading comma but the first a series has."""
    names = table.names
    columns = [(b'"__name__"', names.values, names.codes)]
    columns += [(orjson.dumps(label), column.values, column.codes) for label, column in table.columns.items()]
    block = rows.block(len(columns))
    ids = rows.ids[:, block]
    has = np.empty(ids.shape, dtype=bool)
    sizes = np.empty(len(columns), dtype=np.int64)
    for index, (key, values, codes) in enumerate(columns):
        present = codes >= 0
        if index == 0:
            present = np.array([value != "" for value in values], dtype=bool)[codes]
        used = np.flatnonzero(np.bincount(codes[present], minlength=len(values)))  # a fetch's may hold more
        texts = [key + b":" + orjson.dumps(values[code]) for code in used.tolist()]
        ids[:, index] = np.searchsorted(used, codes) + pieces.add(
            pa.array(texts + [b"," + t for t in texts], _TEXT)
        )
        has[:, index] = present
        sizes[index] = len(used)
    if has.all():
        ids[:, 1:] += sizes[1:]
        return
    later = has.copy()
    later[_firsts(has)] = False
    ids += later * sizes
    rows.mask(block, has)


def vector_body(table: SeriesTable, time_ms: int, values: np.ndarray) -> bytes | memoryview:
    """``{"resultType":"vector","result":[...]}`` of a value per series at ``time_ms``."""
    if not len(table):
        return b'{"resultType":"vector","result":[]}'
    pieces = _Pieces()
    stamp = bytes(second_texts(np.array([time_ms], dtype=np.int64))[0].data)
    middle = pieces.add(_constants(b'},"value":[' + stamp + b',"', b'"]}', b'"]}]}'))
    texts, index = value_texts(values)
    first = pieces.add(_array(texts))
    rows = _Rows(len(table), len(table.columns) + 5)
    _opening(rows, pieces, b'{"resultType":"vector","result":[')
    _labels(table, rows, pieces)
    _constant(rows, middle)
    rows.ids[:, rows.block(1)] = (index + first)[:, None]
    _constant(rows, middle + 1)
    rows.ids[-1, -1] = middle + 2
    return pieces.gather(rows.flat())


def _points(times: np.ndarray, values: np.ndarray, kept: np.ndarray, rows: _Rows, pieces: _Pieces) -> None:
    """Each series' points: ``[t,"`` (``"],[t,"`` after a point) and the value's text, for
    each cell ``kept``, at ``times`` (``[points]`` shared, or ``[series, points]`` each its own)."""
    everywhere = bool(kept.all())
    texts, index = value_texts(np.ascontiguousarray(values).reshape(-1) if everywhere else values[kept])
    first = pieces.add(_array(texts))
    block = rows.block(2 * kept.shape[1])
    stamps, points = rows.ids[:, block][:, 0::2], rows.ids[:, block][:, 1::2]
    if everywhere:
        points[:] = (index + first).reshape(kept.shape)
    else:
        points[kept] = index + first
        rows.mask(block, np.repeat(kept, 2, axis=1))
    if times.ndim == 2 and (times == times[:1]).all():  # own times, the same for every series
        times = times[0]
    if times.ndim == 1:
        texts, index = second_texts(times)
        cells = np.arange(len(times))
    else:  # each distinct time written once (a time is shared by the series of a scrape)
        distinct, cells = np.unique(times.reshape(-1) if everywhere else times[kept], return_inverse=True)
        texts, index = second_texts(distinct)
    array = _array(texts).take(pa.array(index))
    first = pieces.add(pa.concat_arrays([_wrapped(array, b"[", b',"'), _wrapped(array, b'"],[', b',"')]))
    if everywhere or times.ndim == 1:
        stamps[:] = cells.reshape(times.shape) + (first + len(array))
    else:
        stamps[kept] = cells + (first + len(array))
    stamps[_firsts(kept)] -= len(array)


def matrix_body(
    table: SeriesTable, times: np.ndarray, values: np.ndarray, kept: np.ndarray
) -> bytes | memoryview:
    """``{"resultType":"matrix","result":[...]}``: each series' points where ``kept``
    (``[series, points]``), at ``times`` (``[points]`` shared, or ``[series, points]`` each
    its own, ms). Every series has a point."""
    if not len(table):
        return b'{"resultType":"matrix","result":[]}'
    pieces = _Pieces()
    middle = pieces.add(_constants(b'},"values":[', b'"]]}', b'"]]}]}'))
    rows = _Rows(len(table), len(table.columns) + 4 + 2 * kept.shape[1])
    _opening(rows, pieces, b'{"resultType":"matrix","result":[')
    _labels(table, rows, pieces)
    _constant(rows, middle)
    _points(times, values, kept, rows, pieces)
    _constant(rows, middle + 1)
    rows.ids[-1, -1] = middle + 2
    return pieces.gather(rows.flat())
