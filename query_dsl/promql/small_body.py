"""The JSON text of a small answer (:data:`SMALL_CELLS` cells at most), byte for byte what
:mod:`query_dsl.promql.body` writes, by plain bytes joins: pyarrow's kernels, a dozen calls
of fixed cost each, took 0.2 ms for the 61 points of ``42`` and 0.7 ms for 12 series x 61
points, more than evaluating them. Here a series is one ``str %`` of a template made of its
times' texts (``[t,"%s"],...``: shared by every series with a value at each time) over its
values' texts, all in ``str`` (a value's text is made as ``str``: encoding each to bytes
cost a third of the writing), encoded once at the end: 12 series x 61 points in 80 us, a
concatenation per point took 140.
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


_GRIDS: dict[tuple[str, bytes], tuple[list[str], str]] = {}
_GRIDS_KEPT = 64
_GRIDS_LOCK = threading.Lock()


def _grid(times_ms: np.ndarray) -> tuple[list[str], str]:
    """:func:`_heads` of shared times and the template of a series with a value at each,
    remembered for the last few grids asked (a dashboard's panels ask the same start, end
    and step, and a refresh within a step asks them again)."""
    key = (times_ms.dtype.str, times_ms.tobytes())
    with _GRIDS_LOCK:
        found = _GRIDS.get(key)
    if found is None:
        heads = _heads(times_ms)
        found = heads, '%s"],'.join(heads) + '%s"]'
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
) -> bytes:
    """``body.matrix_body``'s text (``value_texts`` as ``str``) of the series whose
    :func:`metric_texts` are ``metrics``: each series' points where ``kept`` (None: every
    cell), at ``times`` (shared ``[points]`` or each series' own ``[series, points]``, ms)."""
    if not len(metrics):
        return b'{"resultType":"matrix","result":[]}'
    own = times.ndim == 2  # each point's own time: its head is at its own place
    if kept is None:
        texts = value_texts(np.ascontiguousarray(values).reshape(-1))
        counts = [values.shape[1]] * len(metrics)
    else:
        texts = value_texts(np.ascontiguousarray(values)[kept])
        counts = kept.sum(axis=1).tolist()
    if not own:
        heads, full = _grid(times)  # shared: read, never change
    elif kept is None:
        heads, full = _heads(np.ascontiguousarray(times).reshape(-1)), ""
    else:
        heads, full = _heads(np.ascontiguousarray(times)[kept]), ""
    records = []
    start = 0
    for row, (metric, count) in enumerate(zip(metrics, counts, strict=True)):
        end = start + count
        if own:
            template = '%s"],'.join(heads[start:end]) + '%s"]'
        elif count == len(heads):  # a value at every time: one template for all such series
            template = full
        else:
            assert kept is not None  # a row short of points has cells not kept
            template = '%s"],'.join([heads[column] for column in np.flatnonzero(kept[row]).tolist()]) + '%s"]'
        series = template % tuple(texts[start:end]) if count else ""
        records.append('{"metric":{' + metric + '},"values":[' + series + "]}")
        start = end
    return ('{"resultType":"matrix","result":[' + ",".join(records) + "]}").encode()
