"""``filter``: keep some series of a matrix.

- ``filter("selector")``: series whose name and labels match a selector, in the VHMS
  selector syntax (``~http\\..*{dc=jb, env!=dev}``).
- ``top(k)`` / ``bottom(k)``: the k series with the greatest / smallest last value.
- ``where_last(op, threshold)``: series whose last value compares true (``>``, ``<``...).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bookkeeper.ground import LabelColumn
from query_dsl.aggregates import aggregate
from query_dsl.apply import COMPARISONS
from query_dsl.exceptions import QueryTypeError
from query_dsl.matrix import Matrix
from vhms import Matcher, parse_selector

__all__ = ["filter_selector", "top", "where_last"]


def _matching(
    matcher: Matcher, column: LabelColumn | None, size: int, check: Callable[[], None] | None
) -> np.ndarray:
    """Which series a matcher keeps, deciding once per distinct value (absent: None)."""
    if column is None:
        return np.full(size, matcher.matches(None))
    verdicts = np.append(matcher.matching(column.values, check), matcher.matches(None))
    kept: np.ndarray = verdicts[column.codes]  # code -1 reads the verdict on None
    return kept


def filter_selector(m: Matrix, selector: str, check: Callable[[], None] | None = None) -> Matrix:
    """The series of ``m`` that ``selector`` selects; ``check`` is called while its regexes
    run through the label values (the evaluator's deadline: whatever it raises stops them)."""
    parsed = parse_selector(selector)
    table = m.table
    keep = np.ones(len(m), dtype=bool)
    for matcher in (x for x in (parsed.name, *parsed.matchers) if x is not None):
        column = table.names if matcher.label == "__name__" else table.columns.get(matcher.label)
        keep &= _matching(matcher, column, len(m), check)
    return m.select(np.flatnonzero(keep))


def _ranked(last: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """Rows by last value, the k first (greatest first, or smallest first); equal values
    rank as a stable sort would put them (largest: later rows first). NaN ranks last."""
    keys = np.where(np.isnan(last), -np.inf if largest else np.inf, last)
    if k >= len(keys):
        order = np.argsort(keys, kind="stable")
        return (order[::-1] if largest else order)[:k]
    # the k-th value bounds the candidates; among values equal to it the stable order decides
    kth = np.partition(keys, len(keys) - k if largest else k - 1)[len(keys) - k if largest else k - 1]
    beyond = np.flatnonzero(keys > kth if largest else keys < kth)
    ties = np.flatnonzero(keys == kth)
    need = k - len(beyond)
    chosen = np.concatenate([beyond, ties[len(ties) - need :] if largest else ties[:need]])
    order = chosen[np.lexsort((chosen, keys[chosen]))]  # by value, then by row
    return order[::-1] if largest else order


def top(m: Matrix, k: int, largest: bool = True) -> Matrix:
    if k < 0:
        raise QueryTypeError(f"top/bottom takes k >= 0, got {k}")
    last = aggregate("last", m.values, 1)
    ranked = _ranked(last, k, largest) if k else np.zeros(0, dtype=np.int64)
    return m.select(ranked[~np.isnan(last[ranked])])


def where_last(m: Matrix, op: str, threshold: float) -> Matrix:
    if op not in COMPARISONS:
        raise QueryTypeError(f"where_last takes one of {' '.join(COMPARISONS)}, got {op!r}")
    last = aggregate("last", m.values, 1)
    with np.errstate(invalid="ignore"):
        keep = np.flatnonzero(COMPARISONS[op](last, np.full_like(last, threshold)) & ~np.isnan(last))
    return m.select(keep)
