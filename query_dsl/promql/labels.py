"""Label sets as PromQL writes them: an empty value is no label, and Prometheus's order of
series (by their sorted label pairs, the name among them)."""

from __future__ import annotations

import numpy as np

from query_dsl.exceptions import MatchingError
from query_dsl.matrix import Matrix

__all__ = ["ensure_unique", "sort_key", "with_label"]


def with_label(labels: dict[str, str], label: str, value: str) -> dict[str, str]:
    """``labels`` with ``label`` set to ``value``, or removed when ``value`` is empty."""
    out = dict(labels)
    if value:
        out[label] = value
    else:
        out.pop(label, None)
    return out


def sort_key(labels: dict[str, str]) -> list[tuple[str, str]]:
    """Prometheus's order of label sets: compare their sorted (name, value) pairs."""
    return sorted(labels.items())


def ensure_unique(m: Matrix, message: str = "vector cannot contain metrics with the same labelset") -> None:
    """``MatchingError`` when two series with the same name and labels have a value at the
    same evaluation time (Prometheus's check of every function's and operator's output)."""
    if len(m) < 2:
        return
    keys = m.table.class_keys(list(m.table.columns))
    combined = keys * (len(m.table.names.values) + 1) + m.table.names.codes.astype(np.int64)
    order = np.argsort(combined, kind="stable")
    same = np.flatnonzero(combined[order][1:] == combined[order][:-1])
    present = ~np.isnan(m.values)
    for index in same.tolist():
        if (present[order[index]] & present[order[index + 1]]).any():
            raise MatchingError(message)
