"""``apply(op, a, b, on=[...] | ignoring=[...], group=left|right)``: operations between two
sets of series matched by equivalence class, as PromQL's vector matching.

- A series' class is its labels (the name never counts), restricted to ``on`` or without
  ``ignoring``.
- **One-to-one** by default: each class appears at most once on each side; the result keeps
  the left series' labels (restricted like the class) and has no name. A class present on
  one side only gives no result.
- **One-to-many** when asked: ``group=left`` lets several left series share a class with one
  right series (each keeps its own labels); ``group=right`` the mirror. Ambiguity that was
  not asked for is a ``MatchingError`` naming the class, never a guess.
- A scalar, or a set holding exactly one series, applies to every series of the other side
  (WarpScript's singleton rule), which keeps its labels.
- Arithmetic ``+ - * / % ^``; comparisons ``> < >= <= == !=`` keep the left value where true
  (NaN where false) and drop the series left with no value at all, as PromQL's filters do
  (a filter drops what it filters), or give 1/0 with ``bool=true``; set operators ``and`` (left series whose
  class is on the right, where the right has a value), ``or`` (left, plus the right series
  of classes the left lacks), ``unless`` (left series whose class is not on the right).

Classes are numbered once for both sides from their label codes
(:func:`~query_dsl.series_table.joint_classes`); pairing, the checks of uniqueness and the
result's labels are numpy over those numbers, never a label dict per series.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bookkeeper.ground import dense_classes
from query_dsl.exceptions import MatchingError, QueryTypeError
from query_dsl.matrix import Matrix
from query_dsl.series_table import SeriesTable, class_order, joint_classes

__all__ = ["ARITHMETIC", "COMPARISONS", "SET_OPERATORS", "apply_op"]

ARITHMETIC: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.divide,
    "%": np.fmod,
    "^": np.power,
}
COMPARISONS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ">": np.greater,
    "<": np.less,
    ">=": np.greater_equal,
    "<=": np.less_equal,
    "==": np.equal,
    "!=": np.not_equal,
}
SET_OPERATORS = ("and", "or", "unless")
Operand = Matrix | float


def _class_labels(a: Matrix, b: Matrix, on: list[str] | None, ignoring: list[str] | None) -> list[str]:
    """The labels that make a class: ``on``, else every label of either side but ``ignoring``."""
    if on is not None:
        return sorted(set(on))
    return sorted((set(a.table.columns) | set(b.table.columns)) - set(ignoring or ()))


def _same_axis(a: Matrix, b: Matrix) -> None:
    if not np.array_equal(a.timestamps, b.timestamps):
        raise MatchingError(
            "the two sides are not on the same time axis (fetch them over the same range and step)"
        )


def _compute(op: str, left: np.ndarray, right: np.ndarray, as_bool: bool) -> np.ndarray:
    with np.errstate(all="ignore"):
        if op in ARITHMETIC:
            return ARITHMETIC[op](left, right)
        truth = COMPARISONS[op](left, right)
        missing = np.isnan(left) | np.isnan(right)
        if as_bool:
            return np.where(missing, np.nan, truth.astype(np.float64))
        return np.where(truth & ~missing, left, np.nan)


def apply_op(
    op: str,
    a: Operand,
    b: Operand,
    *,
    on: list[str] | None = None,
    ignoring: list[str] | None = None,
    group: str | None = None,
    as_bool: bool = False,
) -> Operand:
    if op not in ARITHMETIC and op not in COMPARISONS and op not in SET_OPERATORS:
        raise QueryTypeError(f"unknown operator {op!r}")
    if on is not None and ignoring is not None:
        raise QueryTypeError("apply takes on= or ignoring=, not both")
    if group not in (None, "left", "right"):
        raise QueryTypeError(f"group must be left or right, got {group!r}")
    if not isinstance(a, Matrix) and not isinstance(b, Matrix):
        if op in SET_OPERATORS:
            raise QueryTypeError(f"{op} needs series on both sides")
        return float(_compute(op, np.array(a, dtype=float), np.array(b, dtype=float), as_bool))
    if op in SET_OPERATORS:
        if not isinstance(a, Matrix) or not isinstance(b, Matrix):
            raise QueryTypeError(f"{op} needs series on both sides, not a number")
        return _set_op(op, a, b, on, ignoring)
    if not isinstance(b, Matrix) or (len(b) == 1 and isinstance(a, Matrix) and len(a) != 1 and group is None):
        return _broadcast(op, a, b, as_bool, left_is_set=True)  # type: ignore[arg-type]
    if not isinstance(a, Matrix) or (len(a) == 1 and len(b) != 1 and group is None):
        return _broadcast(op, b, a, as_bool, left_is_set=False)
    return _match(op, a, b, on, ignoring, group, as_bool)


def _broadcast(op: str, series: Matrix, other: Operand, as_bool: bool, left_is_set: bool) -> Matrix:
    other_values = other.values[0] if isinstance(other, Matrix) else np.float64(other)
    if isinstance(other, Matrix):
        _same_axis(series, other)
    if left_is_set:
        values = _compute(op, series.values, np.asarray(other_values), as_bool)
    else:
        values = _compute(op, np.broadcast_to(other_values, series.values.shape), series.values, as_bool)
    if op in COMPARISONS and not as_bool:
        return _filtered(series.with_values(values))
    return Matrix.from_table(series.table.with_name(""), series.timestamps, values, series.step_ms)


def _filtered(result: Matrix) -> Matrix:
    """A comparison's result without the series it left empty."""
    kept = np.flatnonzero(~np.isnan(result.values).all(axis=1))
    return result if len(kept) == len(result) else result.select(kept)


def _match(
    op: str,
    a: Matrix,
    b: Matrix,
    on: list[str] | None,
    ignoring: list[str] | None,
    group: str | None,
    as_bool: bool,
) -> Matrix:
    _same_axis(a, b)
    labels = _class_labels(a, b, on, ignoring)
    left, right = joint_classes(a.table, b.table, labels)
    count = int(max(left.max(initial=-1), right.max(initial=-1))) + 1
    if group != "right":
        many, one, many_side, one_side, one_name = left, right, a.table, b.table, "right"
    else:
        many, one, many_side, one_side, one_name = right, left, b.table, a.table, "left"
    one_count = np.bincount(one, minlength=count)
    many_count = np.bincount(many, minlength=count)
    shared = np.flatnonzero(one_count[one] > 1)
    if len(shared):  # the earliest series of a shared class names the first such class
        row = int(shared[0])
        raise MatchingError(
            f"{one_count[one[row]]} series on the {one_name} side share {one_side.describe(row, labels)}: "
            "matching must be unique there"
        )
    if group is None:
        ambiguous = np.flatnonzero((many_count[many] > 1) & (one_count[many] > 0))
        if len(ambiguous):
            row = int(ambiguous[0])
            raise MatchingError(
                f"{many_count[many[row]]} series on the left share {many_side.describe(row, labels)}: "
                "many-to-one matching must be asked for (group=left or group=right)"
            )
    matched = np.flatnonzero(one_count[many] > 0)
    if group is not None:  # each class's series together, classes in order of first appearance
        matched = matched[np.argsort(dense_classes(many)[0][matched], kind="stable")]
    partner_of = np.full(count, -1, dtype=np.int64)
    partner_of[one] = np.arange(len(one))
    partners = partner_of[many[matched]]
    left_rows, right_rows = (matched, partners) if group != "right" else (partners, matched)
    if group is None:
        table = a.table.take(left_rows).restrict(on, drop=ignoring or ())
    else:
        table = a.table.take(left_rows) if group == "left" else b.table.take(right_rows)
    if op in COMPARISONS and not as_bool:
        table = SeriesTable(a.table.names.take(left_rows), table.columns)
    else:
        table = table.with_name("")
    # one vectorized computation for every matched pair
    values = _compute(op, a.values[left_rows], b.values[right_rows], as_bool)
    result = Matrix.from_table(
        table, a.timestamps, values.reshape(len(left_rows), len(a.timestamps)), a.step_ms
    )
    return _filtered(result) if op in COMPARISONS and not as_bool else result


def _set_op(op: str, a: Matrix, b: Matrix, on: list[str] | None, ignoring: list[str] | None) -> Matrix:
    _same_axis(a, b)
    left, right = joint_classes(a.table, b.table, _class_labels(a, b, on, ignoring))
    count = int(max(left.max(initial=-1), right.max(initial=-1))) + 1
    if op == "and":
        # per class of the right side: the instants where one of its series has a value
        right_classes, firsts = dense_classes(right)
        order, starts = class_order(right_classes, len(firsts))
        present = np.logical_or.reduceat(~np.isnan(b.values[order]), starts, axis=0) if len(firsts) else None
        slot = np.full(count, -1, dtype=np.int64)
        slot[right[firsts]] = np.arange(len(firsts))
        keep = np.flatnonzero(slot[left] >= 0)
        if present is None or not len(keep):
            return a.select(keep)  # nothing matches
        values = np.where(present[slot[left[keep]]], a.values[keep], np.nan)
        return Matrix.from_table(a.table.take(keep), a.timestamps, values, a.step_ms)
    if op == "unless":
        return a.select(np.flatnonzero(np.bincount(right, minlength=count)[left] == 0))
    extra = np.flatnonzero(np.bincount(left, minlength=count)[right] == 0)
    return Matrix.from_table(
        a.table.concat(b.table.take(extra)),
        a.timestamps,
        np.vstack([a.values, b.values[extra]]),
        a.step_ms,
    )
