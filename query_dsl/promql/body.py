"""The JSON text of an instant vector or a matrix in Prometheus's query API, written by
columns: no Python object per point (a raw matrix of 5,000 series x 11 samples made 55,000
``[t, "v"]`` lists, and their JSON cost more than the query).

The answer is gathered from a dictionary of pieces (pyarrow's take over a binary array: the
taken array's buffer is the text): constants (``{"metric":{``, ``},"values":[``...), each
label value as ``"k":"v"`` (with a leading comma too), each time as ``[t,"`` (and ``"],[t,"``
after a point) and each value's text (:func:`query_dsl.promql.texts.value_texts`, one buffer
for all). A series is a row of piece ids (its opening, its labels, its points, its end), the
pieces it lacks (an absent label, a point not kept) masked out; the rows flattened are the
answer's pieces in order.

The rows are made and gathered a block of series at a time (``_BLOCK_CELLS`` ids), the
blocks' texts joined at the end: at a million series the rows of the whole answer were 72 MB
of ids (and as many flags and their flattened copy), arrays past the C library's mapping
ceiling that each query had mapped afresh and the kernel faulted in page by page; a block's
arrays stay in the caches and in the memory the allocator reuses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from query_dsl.promql.texts import Texts, second_texts, value_texts
from query_dsl.series_table import SeriesTable

__all__ = ["matrix_body", "vector_body"]

_TEXT = pa.large_binary()
# piece ids of a block of series: 2 MiB of int64, a few blocks' texts beside them in the caches
_BLOCK_CELLS = 1 << 18


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

    def dictionary(self) -> pa.Array:
        return pa.concat_arrays(self._blocks)


def _gather(dictionary: pa.Array, ids: np.ndarray) -> memoryview:
    """The pieces ``ids``, one after another (a view of the taken array's buffer)."""
    taken = dictionary.take(pa.array(ids))
    offsets = np.frombuffer(taken.buffers()[1], dtype=np.int64)
    text = memoryview(taken.buffers()[2]).cast("B")  # pyarrow's views are of signed chars ("b")
    return text[offsets[taken.offset] : offsets[taken.offset + len(taken)]]


class _Rows:
    """A row of piece ids per series of a block (``rows`` of the answer's), filled block by
    block of columns (:meth:`block`), and where a series has each piece (everywhere until
    :meth:`mask` says otherwise)."""

    def __init__(self, rows: slice, width: int) -> None:
        self.rows = rows
        self.ids = np.empty((rows.stop - rows.start, width), dtype=np.int64)
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


def _by_blocks(size: int, width: int, pieces: _Pieces, fill: Callable[[_Rows], None]) -> bytes | memoryview:
    """The answer's text: the rows of ``size`` series of ``width`` piece ids, made by ``fill``
    a block of series at a time, each block gathered before the next is made (one block's
    text as the view of its taken buffer, not copied)."""
    dictionary = pieces.dictionary()
    step = max(1, _BLOCK_CELLS // width)
    texts = []
    for start in range(0, size, step):
        rows = _Rows(slice(start, min(start + step, size)), width)
        fill(rows)
        texts.append(_gather(dictionary, rows.flat()))
    return texts[0] if len(texts) == 1 else b"".join(texts)


def _firsts(has: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cells ``(rows, columns)`` of each row's first ``has``."""
    return np.arange(len(has)), np.argmax(has, axis=1)


def _constant(rows: _Rows, piece: int) -> None:
    rows.ids[:, rows.block(1)] = piece


def _opening(rows: _Rows, first: int) -> None:
    """``head`` and ``{"metric":{`` for the first series, ``,{"metric":{`` for the others
    (the pieces ``first`` and ``first + 1`` of :func:`_openings`)."""
    column = rows.block(1)
    rows.ids[:, column] = first + 1
    if rows.rows.start == 0:
        rows.ids[0, column] = first


def _openings(pieces: _Pieces, head: bytes) -> int:
    return pieces.add(_constants(head + b'{"metric":{', b',{"metric":{'))


@dataclass(frozen=True)
class _Labels:
    """Each label column's piece id per code (``ids``: without the leading comma; ``sizes``
    after it, the same with), the codes, and whether the series has the label (None:
    every series has every label)."""

    ids: list[np.ndarray]
    codes: list[np.ndarray]
    sizes: np.ndarray
    has: np.ndarray | None


def _labels(table: SeriesTable, pieces: _Pieces) -> _Labels:
    """The label pieces of ``table``'s series: the name first, then the labels sorted, each
    ``"k":"v"``, with a leading comma too (for all but the first a series has); a column no
    series has (the name an operator dropped) left out."""
    names = table.names
    named = np.array([value != "" for value in names.values], dtype=bool)[names.codes]
    columns = [(b'"__name__"', names.values, names.codes, named)]
    columns += [
        (orjson.dumps(label), column.values, column.codes, column.codes >= 0)
        for label, column in table.columns.items()
    ]
    columns = [column for column in columns if column[3].any()]
    sizes = np.empty(len(columns), dtype=np.int64)
    ids, codes = [], []
    for index, (key, values, column_codes, present) in enumerate(columns):
        used = np.flatnonzero(
            np.bincount(column_codes[present], minlength=len(values))
        )  # a fetch's may hold more
        texts = [key + b":" + orjson.dumps(values[code]) for code in used.tolist()]
        lookup = np.zeros(len(values) + 1, dtype=np.int64)  # the last: an absent label's (-1), masked
        lookup[used] = np.arange(len(used)) + pieces.add(pa.array(texts + [b"," + t for t in texts], _TEXT))
        ids.append(lookup)
        codes.append(column_codes)
        sizes[index] = len(used)
    everywhere = all(column[3].all() for column in columns)
    has = None if everywhere else np.stack([column[3] for column in columns], axis=1)
    return _Labels(ids, codes, sizes, has)


def _label_ids(rows: _Rows, labels: _Labels) -> None:
    """The block's label pieces (:func:`_labels`)."""
    block = rows.block(len(labels.ids))
    ids = rows.ids[:, block]
    for index, (lookup, codes) in enumerate(zip(labels.ids, labels.codes, strict=True)):
        ids[:, index] = lookup[codes[rows.rows]]
    if labels.has is None:
        ids[:, 1:] += labels.sizes[1:]
        return
    has = labels.has[rows.rows]
    later = has.copy()
    later[_firsts(has)] = False
    ids += later * labels.sizes
    rows.mask(block, has)


def vector_body(table: SeriesTable, time_ms: int, values: np.ndarray) -> bytes | memoryview:
    """``{"resultType":"vector","result":[...]}`` of a value per series at ``time_ms``."""
    if not len(table):
        return b'{"resultType":"vector","result":[]}'
    pieces = _Pieces()
    stamp = bytes(second_texts(np.array([time_ms], dtype=np.int64))[0].data)
    middle = pieces.add(_constants(b'},"value":[' + stamp + b',"', b'"]}', b'"]}]}'))
    texts, index = value_texts(values)
    index += pieces.add(_array(texts))
    opening = _openings(pieces, b'{"resultType":"vector","result":[')
    labels = _labels(table, pieces)
    end = len(table)

    def fill(rows: _Rows) -> None:
        _opening(rows, opening)
        _label_ids(rows, labels)
        _constant(rows, middle)
        rows.ids[:, rows.block(1)] = index[rows.rows, None]
        _constant(rows, middle + 1)
        if rows.rows.stop == end:
            rows.ids[-1, -1] = middle + 2

    return _by_blocks(len(table), len(labels.ids) + 4, pieces, fill)


@dataclass(frozen=True)
class _Points:
    """Each series' points (:func:`_points`): the piece of each value's text and of its
    time's ``[t,"`` (``before`` ids on: ``"],[t,"``), over the cells kept row after row
    (``starts``: where each row's begin; None: every cell is kept, ``width`` a row), or the
    times' one per column (``shared``)."""

    kept: np.ndarray
    values: np.ndarray
    times: np.ndarray
    shared: bool
    starts: np.ndarray | None
    before: int


def _points(times: np.ndarray, values: np.ndarray, kept: np.ndarray, pieces: _Pieces) -> _Points:
    """The pieces of each series' points: ``[t,"`` (``"],[t,"`` after a point) and the
    value's text, for each cell ``kept``, at ``times`` (``[points]`` shared, or ``[series,
    points]`` each its own)."""
    everywhere = bool(kept.all())
    texts, index = value_texts(np.ascontiguousarray(values).reshape(-1) if everywhere else values[kept])
    index += pieces.add(_array(texts))
    if times.ndim == 2 and (times == times[:1]).all():  # own times, the same for every series
        times = times[0]
    if times.ndim == 1:
        texts, at = second_texts(times)
        cells = np.arange(len(times))
    else:  # each distinct time written once (a time is shared by the series of a scrape)
        distinct, cells = np.unique(times.reshape(-1) if everywhere else times[kept], return_inverse=True)
        texts, at = second_texts(distinct)
    array = _array(texts).take(pa.array(at))
    first = pieces.add(pa.concat_arrays([_wrapped(array, b"[", b',"'), _wrapped(array, b'"],[', b',"')]))
    starts = None if everywhere else np.concatenate([[0], np.cumsum(kept.sum(axis=1))])
    return _Points(kept, index, cells.reshape(-1) + first, times.ndim == 1, starts, len(array))


def _point_ids(rows: _Rows, points: _Points) -> None:
    """The block's point pieces (:func:`_points`)."""
    kept = points.kept[rows.rows]
    width = kept.shape[1]
    block = rows.block(2 * width)
    stamps, values = rows.ids[:, block][:, 0::2], rows.ids[:, block][:, 1::2]
    start, stop = rows.rows.start, rows.rows.stop
    cells = (
        slice(start * width, stop * width)
        if points.starts is None
        else slice(points.starts[start], points.starts[stop])
    )
    if points.starts is None:
        values[:] = points.values[cells].reshape(kept.shape)
    else:
        values[kept] = points.values[cells]
        rows.mask(block, np.repeat(kept, 2, axis=1))
    if points.shared:
        stamps[:] = points.times + points.before
    elif points.starts is None:
        stamps[:] = points.times[cells].reshape(kept.shape) + points.before
    else:
        stamps[kept] = points.times[cells] + points.before
    stamps[_firsts(kept)] -= points.before


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
    opening = _openings(pieces, b'{"resultType":"matrix","result":[')
    labels = _labels(table, pieces)
    points = _points(times, values, kept, pieces)
    end = len(table)

    def fill(rows: _Rows) -> None:
        _opening(rows, opening)
        _label_ids(rows, labels)
        _constant(rows, middle)
        _point_ids(rows, points)
        _constant(rows, middle + 1)
        if rows.rows.stop == end:
            rows.ids[-1, -1] = middle + 2

    return _by_blocks(len(table), len(labels.ids) + 3 + 2 * kept.shape[1], pieces, fill)
