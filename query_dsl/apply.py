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
  (NaN where false), or give 1/0 with ``bool=true``; set operators ``and`` (left series whose
  class is on the right, where the right has a value), ``or`` (left, plus the right series
  of classes the left lacks), ``unless`` (left series whose class is not on the right).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from query_dsl.exceptions import MatchingError, QueryTypeError
from query_dsl.matrix import Matrix

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


def _key_function(
    on: list[str] | None, ignoring: list[str] | None
) -> Callable[[dict[str, str]], tuple[tuple[str, str], ...]]:
    """The class of a label set, as a function prepared once per operation (it runs per series)."""
    if on is not None:
        chosen = sorted(on)
        if len(chosen) == 1:
            (only,) = chosen
            return lambda labels: ((only, labels[only]),) if only in labels else ()
        return lambda labels: tuple([(k, labels[k]) for k in chosen if k in labels])
    ignored = frozenset(ignoring or ())
    if not ignored:
        return lambda labels: tuple(sorted(labels.items()))
    return lambda labels: tuple(sorted([(k, v) for k, v in labels.items() if k not in ignored]))


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
    names = series.names if op in COMPARISONS and not as_bool else [""] * len(series)
    return series.with_values(values, names)


def _index(
    m: Matrix,
    on: list[str] | None,
    ignoring: list[str] | None,
    known: dict[int, tuple[tuple[str, str], ...]] | None = None,
) -> dict[tuple[tuple[str, str], ...], list[int]]:
    """Rows of ``m`` by class. ``known`` caches the class of each label set by identity:
    fetches share label sets, so both sides of an operation often hold the same ones."""
    key_of = _key_function(on, ignoring)
    known = {} if known is None else known
    classes: dict[tuple[tuple[str, str], ...], list[int]] = {}
    for row, labels in enumerate(m.labels):
        key = known.get(id(labels))
        if key is None:
            key = known[id(labels)] = key_of(labels)
        classes.setdefault(key, []).append(row)
    return classes


def _describe(key: tuple[tuple[str, str], ...]) -> str:
    return "{" + ",".join(f"{k}={v}" for k, v in key) + "}"


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
    known: dict[int, tuple[tuple[str, str], ...]] = {}
    left, right = _index(a, on, ignoring, known), _index(b, on, ignoring, known)
    many, one = (left, right) if group != "right" else (right, left)
    for key, rows in one.items():
        if len(rows) > 1:
            side = "right" if group != "right" else "left"
            raise MatchingError(
                f"{len(rows)} series on the {side} side share {_describe(key)}: matching must be unique there"
            )
    if group is None:
        for key, rows in many.items():
            if len(rows) > 1 and key in one:
                raise MatchingError(
                    f"{len(rows)} series on the left share {_describe(key)}: many-to-one matching must be "
                    "asked for (group=left or group=right)"
                )
    names: list[str] = []
    labels: list[dict[str, str]] = []
    left_rows: list[int] = []
    right_rows: list[int] = []
    for key, many_rows in many.items():
        if key not in one:
            continue
        one_row = one[key][0]
        class_labels = dict(key)  # the result's labels for this class, shared by its rows
        for many_row in many_rows:
            left_row, right_row = (many_row, one_row) if group != "right" else (one_row, many_row)
            left_rows.append(left_row)
            right_rows.append(right_row)
            if group is None:
                labels.append(class_labels)
            else:
                labels.append(a.labels[many_row] if group == "left" else b.labels[many_row])
            names.append(a.names[left_row] if op in COMPARISONS and not as_bool else "")
    # one vectorized computation for every matched pair
    values = _compute(op, a.values[left_rows], b.values[right_rows], as_bool)
    return Matrix(names, labels, a.timestamps, values.reshape(len(left_rows), len(a.timestamps)), a.step_ms)


def _set_op(op: str, a: Matrix, b: Matrix, on: list[str] | None, ignoring: list[str] | None) -> Matrix:
    _same_axis(a, b)
    key_of = _key_function(on, ignoring)
    right = _index(b, on, ignoring)
    if op == "and":
        keep, values = [], []
        for row, labels in enumerate(a.labels):
            partners = right.get(key_of(labels))
            if partners:
                present = ~np.isnan(b.values[partners]).all(axis=0)
                keep.append(row)
                values.append(np.where(present, a.values[row], np.nan))
        picked = a.select(keep)
        return picked.with_values(np.vstack(values) if values else np.zeros((0, len(a.timestamps))))
    left_keys = {key_of(labels) for labels in a.labels}
    if op == "unless":
        return a.select([row for row, labels in enumerate(a.labels) if key_of(labels) not in right])
    extra = b.select([row for row, labels in enumerate(b.labels) if key_of(labels) not in left_keys])
    return Matrix(
        a.names + extra.names,
        a.labels + extra.labels,
        a.timestamps,
        np.vstack([a.values, extra.values]),
        a.step_ms,
    )
