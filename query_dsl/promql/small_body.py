"""The JSON text of a small answer (:data:`SMALL_CELLS` cells at most), byte for byte what
:mod:`query_dsl.promql.body` writes, by plain joins: the columnar writer's calls have a
fixed cost each (pyarrow's kernels, as it was written then, took 0.2 ms for the 61 points of
``42`` and 0.7 ms for 12 series x 61 points, more than evaluating them). Here the answer is
one ``str.join`` of its values' texts interleaved with the texts between them (a series'
opening and its first time, ``"],[t,"`` between two points, its closing), all in ``str`` (a
value's text is made as ``str``: encoding each to bytes cost a third of the writing),
encoded once at the end; the texts between the points at shared times are remembered with
the time grid and picked by column.
12 series x 61 points with their values' texts: a concatenation per point took 140 us, a
``str %`` of a template per series 53, the join 36 (``str %`` parses its template and
converts each argument again).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np
import orjson

from query_dsl.series_table import SeriesTable

__all__ = ["SMALL_CELLS", "metric_texts", "small_matrix_body", "small_vector_body"]

SMALL_CELLS = 4096  # where the columnar writer (body.py) becomes the faster (measured: about 3-5K cells)


def _seconds(ms: int) -> float | int:
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


def _heads(times_ms: np.ndarray) -> list[str]:
    """``[t,"`` for each time (ms), ``t`` in seconds as :func:`_seconds` writes it."""
    if times_ms.dtype.kind in "iu" and not (times_ms % 1000).any():  # whole seconds: a C format each
        return [f'[{t},"' for t in (times_ms // 1000).tolist()]
    return ["[" + repr(_seconds(t)) + ',"' for t in times_ms.tolist()]


_GRIDS: dict[tuple[str, bytes], tuple[list[str], np.ndarray]] = {}
_GRIDS_KEPT = 64
_GRIDS_LOCK = threading.Lock()
# a table's answers' texts (:func:`_kept_parts`) kept for this many grids, for answers of this
# many cells at most: a list of 16 KB at most each (its texts are the grid's, shared), 32 KB a
# table (the 512 selectors' tables ``selection.PICKED`` keeps: 17 MB at most)
_TABLE_GRIDS_KEPT = 2
_KEPT_CELLS = 1024


def _before(heads: list[str]) -> list[str]:
    """The text before the value of each point whose :func:`_heads` are ``heads``, when it is
    not its series' first: ``"],[t,"``."""
    return ['"],' + head for head in heads]


def _grid(times_ms: np.ndarray) -> tuple[list[str], np.ndarray]:
    """:func:`_before` of shared times (a list, and an object array to pick from),
    remembered for the last few grids asked (a dashboard's panels ask the same start, end
    and step, and a refresh within a step asks them again)."""
    key = (times_ms.dtype.str, times_ms.tobytes())
    with _GRIDS_LOCK:
        found = _GRIDS.get(key)
    if found is None:
        before = _before(_heads(times_ms))
        picked = np.empty(len(before), dtype=object)
        picked[:] = before
        found = before, picked
        with _GRIDS_LOCK:
            if len(_GRIDS) >= _GRIDS_KEPT:
                del _GRIDS[next(iter(_GRIDS))]
            _GRIDS[key] = found
    return found


def _json(text: str) -> str:
    return orjson.dumps(text).decode()


def metric_texts(table: SeriesTable) -> list[str]:
    """``"__name__":"x","k":"v"`` per series, as ``body._metrics`` writes it; made once per
    table (a selector's table is reused while it picks the same series): shared, never to
    be changed."""
    return table.derived("prometheus_metric_texts", _metric_texts)


def _metric_texts(table: SeriesTable) -> list[str]:
    names = table.names
    named = ['"__name__":' + _json(name) if name else "" for name in names.values]
    columns = [
        ([_json(label) + ":" + _json(value) for value in column.values], column.codes.tolist())
        for label, column in sorted(table.columns.items())
    ]
    out = []
    for row, code in enumerate(names.codes.tolist()):
        parts = [named[code]] if named[code] else []
        parts += [texts[codes[row]] for texts, codes in columns if codes[row] >= 0]
        out.append(",".join(parts))
    return out


def small_vector_body(
    metrics: Sequence[str], time_ms: int, values: np.ndarray, value_texts: Callable[[np.ndarray], list[str]]
) -> bytes:
    """``body.vector_body``'s text (``value_texts`` as ``str``) of the series whose
    :func:`metric_texts` are ``metrics``."""
    if not len(metrics):
        return b'{"resultType":"vector","result":[]}'
    head = '},"value":[' + repr(_seconds(time_ms)) + ',"'
    records = [
        '{"metric":{' + metric + head + text + '"]}'
        for metric, text in zip(metrics, value_texts(values), strict=True)
    ]
    return ('{"resultType":"vector","result":[' + ",".join(records) + "]}").encode()


def small_matrix_body(
    metrics: Sequence[str],
    times: np.ndarray,
    values: np.ndarray,
    kept: np.ndarray | None,
    value_texts: Callable[[np.ndarray], list[str]],
    table: SeriesTable | None = None,
) -> bytes:
    """``body.matrix_body``'s text (``value_texts`` as ``str``) of the series whose
    :func:`metric_texts` are ``metrics``: each series' points where ``kept`` (None: every
    cell), at ``times`` (shared ``[points]`` or each series' own ``[series, points]``, ms).
    With ``table`` (``metrics`` are its texts, in its order), an answer of every cell at shared
    times takes the texts between its values as made once per table and grid."""
    if not len(metrics):
        return b'{"resultType":"matrix","result":[]}'
    if kept is None:
        texts = value_texts(np.ascontiguousarray(values).reshape(-1))
        if table is not None and times.ndim == 1 and values.size <= _KEPT_CELLS:
            parts = _kept_parts(table, metrics, times).copy()
            parts[1::2] = texts
            return "".join(parts).encode()
        counts = [values.shape[1]] * len(metrics)
    else:
        texts = value_texts(np.ascontiguousarray(values)[kept])
        counts = kept.sum(axis=1).tolist()
    # the text before each value as if it were not its series' first (each series' first
    # is then given its opening): shared times' texts are remembered, picked by column
    if times.ndim == 2:  # each point's own time
        own = np.ascontiguousarray(times)
        pieces = _before(_heads(own.reshape(-1) if kept is None else own[kept]))
    elif kept is None:
        pieces = _grid(times)[0] * len(metrics)
    else:
        pieces = _grid(times)[1][np.nonzero(kept)[1]].tolist()
    parts = _parts(metrics, counts, pieces)
    parts[1::2] = texts
    return "".join(parts).encode()


def _parts(metrics: Sequence[str], counts: list[int], pieces: list[str]) -> list[str]:
    """The answer's texts, a value's place (every other one) left empty: ``pieces`` (the
    text before each value as if it were not its series' first) with each series' first
    given its opening (its series has ``counts`` points), and the closing."""
    pending = '{"resultType":"matrix","result":['
    start = 0
    for metric, count in zip(metrics, counts, strict=True):
        opening = f'{pending}{{"metric":{{{metric}}},"values":['
        if count:
            pieces[start] = opening + pieces[start][3:]
            pending = '"]]},'
            start += count
        else:
            pending = opening + "]},"
    pieces.append(pending[:-1] + "]}")
    parts: list[str] = [""] * (2 * len(pieces) - 1)
    parts[0::2] = pieces
    return parts


def _kept_parts(table: SeriesTable, metrics: Sequence[str], times: np.ndarray) -> list[str]:
    """:func:`_parts` of every cell of ``table``'s series (``metrics``) at shared ``times``,
    made once per table and grid (the last few grids asked of it): the answer's texts but
    its values' (12 series x 61 points: a copy and a slice's assignment where making them
    was a list of 732 pieces, their openings and an interleaving list)."""
    kept: dict[bytes, list[str]] = table.derived("prometheus_matrix_parts", lambda _: {})
    key = times.astype(np.int64, copy=False).tobytes()
    with _GRIDS_LOCK:
        found = kept.get(key)
    if found is None:
        found = _parts(metrics, [len(times)] * len(metrics), _grid(times)[0] * len(metrics))
        with _GRIDS_LOCK:
            if len(kept) >= _TABLE_GRIDS_KEPT:
                del kept[next(iter(kept))]
            kept[key] = found
    return found
