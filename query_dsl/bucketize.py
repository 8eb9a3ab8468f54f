"""``bucketize(span, aggregate)``: a coarser time axis. The bucket ending at instant ``e``
(a multiple of ``span``) aggregates the instants in ``(e - span, e]``, as WarpScript's
BUCKETIZE does; each bucket is stamped with its end."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from query_dsl.aggregates import aggregate
from query_dsl.exceptions import QueryTypeError
from query_dsl.matrix import Matrix

__all__ = ["bucketize"]


def bucketize(
    m: Matrix,
    span_ms: int,
    name: str,
    params: tuple[float, ...] = (),
    check: Callable[[], None] | None = None,
) -> Matrix:
    """``m`` on buckets of ``span_ms``; ``check`` is called between buckets (the evaluator's
    deadline: whatever it raises stops them)."""
    if span_ms <= 0 or span_ms % m.step_ms:
        raise QueryTypeError(
            f"bucketize span {span_ms} ms is not a positive multiple of the step {m.step_ms} ms"
        )
    if not len(m.timestamps):
        return Matrix.from_table(m.table, m.timestamps, m.values, span_ms)
    ends = -(-m.timestamps // span_ms) * span_ms  # the bucket end of each instant
    unique_ends, first_index = np.unique(ends, return_index=True)
    columns = []
    for position, start in enumerate(first_index):
        if check is not None and not position % 64:
            check()
        stop = first_index[position + 1] if position + 1 < len(first_index) else len(ends)
        columns.append(aggregate(name, m.values[:, start:stop], 1, params))
    values = np.stack(columns, axis=1) if columns else np.zeros((len(m), 0))
    return Matrix.from_table(m.table, unique_ends, values, span_ms)
