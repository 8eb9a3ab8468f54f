"""``filter``: keep some series of a matrix.

- ``filter("selector")``: series whose name and labels match a selector, in the VHMS
  selector syntax (``~http\\..*{dc=jb, env!=dev}``).
- ``top(k)`` / ``bottom(k)``: the k series with the greatest / smallest last value.
- ``where_last(op, threshold)``: series whose last value compares true (``>``, ``<``...).
"""

from __future__ import annotations

import numpy as np

from query_dsl.aggregates import aggregate
from query_dsl.apply import COMPARISONS
from query_dsl.exceptions import QueryTypeError
from query_dsl.matrix import Matrix
from vhms.selector import parse_selector

__all__ = ["filter_selector", "top", "where_last"]


def filter_selector(m: Matrix, selector: str) -> Matrix:
    parsed = parse_selector(selector)
    matchers = [x for x in (parsed.name, *parsed.matchers) if x is not None]
    keep = [
        row
        for row, (name, labels) in enumerate(zip(m.names, m.labels, strict=True))
        if all(x.matches(name if x.label == "__name__" else labels.get(x.label)) for x in matchers)
    ]
    return m.select(keep)


def top(m: Matrix, k: int, largest: bool = True) -> Matrix:
    if k < 0:
        raise QueryTypeError(f"top/bottom takes k >= 0, got {k}")
    last = aggregate("last", m.values, 1)
    order = np.argsort(np.where(np.isnan(last), -np.inf if largest else np.inf, last), kind="stable")
    ranked = (order[::-1] if largest else order)[:k]
    return m.select([i for i in ranked.tolist() if not np.isnan(last[i])])


def where_last(m: Matrix, op: str, threshold: float) -> Matrix:
    if op not in COMPARISONS:
        raise QueryTypeError(f"where_last takes one of {' '.join(COMPARISONS)}, got {op!r}")
    last = aggregate("last", m.values, 1)
    with np.errstate(invalid="ignore"):
        keep = np.flatnonzero(COMPARISONS[op](last, np.full_like(last, threshold)) & ~np.isnan(last))
    return m.select(keep)
