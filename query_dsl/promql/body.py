"""The JSON text of an instant vector or a matrix in Prometheus's query API, written by
columns: no Python object per point (a raw matrix of 5,000 series x 11 samples made 55,000
``[t, "v"]`` lists, and their JSON cost more than the query).

The answer is rows of text written field by field (:class:`query_dsl.text_rows.TextRows`):
a vector's row is a series (its opening, its labels, its time, its value's text, its end),
each label value written once as ``"k":"v"`` (and ``,"k":"v"`` after a label) and picked by
the series' code; a matrix's row is a point (``[t,"`` or ``"],[t,"`` after a point, then its
value's text), the first point of a series preceded by the series' head (its opening and
labels, themselves rows of text made first) and the last followed by its end. The values'
texts are one buffer (:func:`query_dsl.promql.texts.value_texts`). A wide answer is returned
laid out (:class:`query_dsl.text_rows.RowsText`): the query API sends it a block at a time as
the blocks are written, so that it never exists whole (issue 27).
"""

from __future__ import annotations

import numpy as np
import orjson

from query_dsl.promql.texts import Texts, second_texts, value_texts
from query_dsl.series_table import SeriesTable
from query_dsl.text_rows import Dictionary, RowsText, TextRows, dictionary

__all__ = ["matrix_body", "vector_body"]


def _labels(table: SeriesTable, rows: TextRows) -> None:
    """Each series' label pieces: the name first, then the labels sorted, each ``"k":"v"``,
    with a leading comma but the first a series has."""
    names = table.names
    columns = [(b'"__name__"', names.values, names.codes)]
    columns += [(orjson.dumps(label), column.values, column.codes) for label, column in table.columns.items()]
    seen: np.ndarray | None = None  # the series that have a label already
    everyone = False  # every series has one already
    for index, (key, values, codes) in enumerate(columns):
        present = np.array([value != "" for value in values], dtype=bool)[codes] if index == 0 else codes >= 0
        every = bool(present.all())  # the usual label: no mask to apply (a million series: ~5 ms a mask)
        if not every and not present.any():
            continue
        used = np.flatnonzero(np.bincount(codes if every else codes[present], minlength=len(values)))
        texts = [key + b":" + orjson.dumps(values[code]) for code in used.tolist()]
        if len(used) == len(values):  # a fetch's column may hold more values than its series use
            picks = codes.astype(np.int64)
        else:
            number = np.zeros(len(values), dtype=np.int64)
            number[used] = np.arange(len(used))
            picks = number[codes]
        if not every:
            picks[~present] = -1
        if everyone and every:
            picks += len(used)
        elif everyone:
            picks[present] += len(used)
        elif seen is not None:
            picks[seen & present] += len(used)
        everyone = everyone or every
        seen = None if everyone else present if seen is None else seen | present
        rows.pick(dictionary(texts + [b"," + text for text in texts]), picks)


def _dictionary(rows: TextRows) -> Dictionary:
    """The rows' texts as a dictionary."""
    text, offsets = rows.join(b"", b"", b"")
    return Dictionary.of(np.frombuffer(text, dtype=np.uint8), offsets)


def _wrapped(texts: Texts, prefix: bytes, suffix: bytes) -> Dictionary:
    """``prefix + text + suffix`` of each of ``texts``."""
    rows = TextRows(len(texts))
    rows.constant(prefix)
    rows.pick(Dictionary.of(texts.data, texts.offsets), np.arange(len(texts)))
    rows.constant(suffix)
    return _dictionary(rows)


def vector_body(table: SeriesTable, time_ms: int, values: np.ndarray) -> bytes | RowsText:
    """``{"resultType":"vector","result":[...]}`` of a value per series at ``time_ms``
    (laid out, to be written whole or by blocks)."""
    if not len(table):
        return b'{"resultType":"vector","result":[]}'
    stamp = bytes(second_texts(np.array([time_ms], dtype=np.int64))[0].data)
    rows = TextRows(len(table))
    rows.constant(b'{"metric":{')
    _labels(table, rows)
    rows.constant(b'},"value":[' + stamp + b',"')
    texts, index = value_texts(values)
    rows.pick(Dictionary.of(texts.data, texts.offsets), index)
    rows.constant(b'"]}')
    return rows.laid_out(b'{"resultType":"vector","result":[', b",", b"]}")


# points a series up to which a matrix of shared times, every point kept, is written a row per
# series (a constant and a value a point: a few fields), beyond, a row per point (fewer calls)
_NARROW = 16


def _head(table: SeriesTable, rows: TextRows) -> None:
    """A series' ``{"metric":{...},"values":[``."""
    rows.constant(b'{"metric":{')
    _labels(table, rows)
    rows.constant(b'},"values":[')


def _stamps(times: np.ndarray, kept: np.ndarray) -> tuple[Dictionary, Dictionary, np.ndarray]:
    """The points' ``[t,"`` texts (a series' first), their ``"],[t,"`` texts (the others), and
    each kept point's time among them (in row order)."""
    if times.ndim == 1:
        texts, index = second_texts(times)
        cells = np.broadcast_to(index, kept.shape)[kept]
    else:  # each distinct time written once (a time is shared by the series of a scrape)
        distinct, inverse = np.unique(times, return_inverse=True)
        texts, index = second_texts(distinct)
        cells = index[inverse.reshape(kept.shape)[kept]]
    return _wrapped(texts, b"[", b',"'), _wrapped(texts, b'"],[', b',"'), cells


def _by_point(
    table: SeriesTable,
    stamps: tuple[Dictionary, Dictionary, np.ndarray],
    values: Dictionary,
    points: np.ndarray,
) -> TextRows:
    """A row per kept point: its series' head and ``[t,"`` at its first, ``"],[t,"`` at the
    others, its value's text, its series' end after its last (fields of the rows that have
    them: each of one length, mostly)."""
    firsts, laters, cells = stamps
    kept = points >= 0
    ends = np.cumsum(np.count_nonzero(kept, axis=1))  # each series' points end there (every series has one)
    later = np.ones(int(ends[-1]), dtype=bool)
    at_first = ends - ends[0]
    at_first[1:] = ends[:-1]
    later[at_first] = False
    at_later = np.flatnonzero(later)
    heads = TextRows(len(table))
    _head(table, heads)
    rows = TextRows(len(later))
    rows.pick(_dictionary(heads), np.arange(len(table)), at=at_first)
    rows.pick(firsts, cells[at_first], at=at_first)
    rows.pick(laters, cells[at_later], at=at_later)
    rows.pick(values, points[kept])
    closing = np.zeros(len(table), dtype=np.int64)
    closing[-1] = 1  # the last series' end closes the list
    rows.pick(dictionary([b'"]]},', b'"]]}']), closing, at=ends - 1)
    return rows


def _by_series(table: SeriesTable, times: np.ndarray, values: Dictionary, points: np.ndarray) -> TextRows:
    """A row per series, every point kept at shared ``times``: its head, each point's ``[t,"``
    (``"],[t,"`` after the first, a constant) and value's text, its end."""
    texts, index = second_texts(times)
    rows = TextRows(len(table))
    _head(table, rows)
    columns = points.T.copy()  # a point's codes, contiguous
    for column, stamp in enumerate(index.tolist()):
        text = texts.data[texts.offsets[stamp] : texts.offsets[stamp + 1]].tobytes()
        rows.constant((b'"],[' if column else b"[") + text + b',"')
        rows.pick(values, columns[column])
    rows.constant(b'"]]}')
    return rows


def matrix_body(
    table: SeriesTable, times: np.ndarray, values: np.ndarray, kept: np.ndarray
) -> bytes | RowsText:
    """``{"resultType":"matrix","result":[...]}``: each series' points where ``kept``
    (``[series, points]``), at ``times`` (``[points]`` shared, or ``[series, points]`` each
    its own, ms), laid out. Every series has a point."""
    if not len(table):
        return b'{"resultType":"matrix","result":[]}'
    everywhere = bool(kept.all())
    texts, index = value_texts(np.ascontiguousarray(values).reshape(-1) if everywhere else values[kept])
    if everywhere:
        points = index.reshape(kept.shape)
    else:
        points = np.full(kept.shape, -1, dtype=np.int64)
        points[kept] = index
    if times.ndim == 2 and (times == times[:1]).all():  # own times, the same for every series
        times = times[0]
    head, words = b'{"resultType":"matrix","result":[', Dictionary.of(texts.data, texts.offsets)
    if everywhere and times.ndim == 1 and kept.shape[1] <= _NARROW:
        return _by_series(table, times, words, points).laid_out(head, b",", b"]}")
    return _by_point(table, _stamps(times, kept), words, points).laid_out(head, b"", b"]}")
