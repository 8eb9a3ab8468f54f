"""``reduce``: one series per equivalence class, aggregating its members at each instant.

Classes: ``by=[l1, l2]`` groups series by the values of those labels (a missing label is
its own value, "absent"); ``without=[l]`` by every label but those; neither: one class of
all series (WarpScript's ``[]``, PromQL's ``sum(x)``). The result keeps the labels that
every member shares with the same value, and the name the members share ("" otherwise).
"""

from __future__ import annotations

import numpy as np

from query_dsl.aggregates import aggregate
from query_dsl.exceptions import QueryTypeError
from query_dsl.matrix import Matrix

__all__ = ["reduce_matrix"]


def _class_key(labels: dict[str, str], by: list[str] | None, without: list[str] | None) -> tuple[object, ...]:
    if by is not None:
        return tuple([labels.get(label) for label in by])  # label order is fixed by `by`
    if without is not None:
        return tuple(sorted((k, v) for k, v in labels.items() if k not in without))
    return ()


def reduce_matrix(
    m: Matrix,
    name: str,
    by: list[str] | None = None,
    without: list[str] | None = None,
    params: tuple[float, ...] = (),
) -> Matrix:
    if by is not None and without is not None:
        raise QueryTypeError("reduce takes by= or without=, not both")
    classes: dict[tuple[object, ...], list[int]] = {}
    for row, labels in enumerate(m.labels):
        classes.setdefault(_class_key(labels, by, without), []).append(row)
    floor = set(by or ())  # the class's own labels: shared by construction
    names, label_sets, rows = [], [], []
    for members in classes.values():
        first = m.labels[members[0]]
        rest = [m.labels[i] for i in members[1:]]
        shared = {k: v for k, v in first.items() if k in floor or all(other.get(k) == v for other in rest)}
        member_names = {m.names[i] for i in members}
        names.append(member_names.pop() if len(member_names) == 1 else "")
        label_sets.append(shared)
        rows.append(aggregate(name, m.values[members], 0, params))
    values = np.vstack(rows) if rows else np.zeros((0, len(m.timestamps)))
    return Matrix(names, label_sets, m.timestamps, values, m.step_ms)
