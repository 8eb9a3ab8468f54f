"""What a PromQL expression evaluates to, over the evaluation times of a query.

- an instant vector: a :class:`~query_dsl.matrix.Matrix`, the engine's value type, on the
  evaluation times (NaN: the series has no sample at that time; a sample whose value is
  NaN holds :data:`NAN_VALUE`, a NaN of its own bits: :func:`present` tells them apart);
- a range vector: :class:`~query_dsl.promql.selection.Samples` with the window's range;
- a scalar: :class:`Scalar`, one value per evaluation time;
- a string: :class:`String`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from query_dsl.matrix import Matrix
from query_dsl.promql.selection import Samples

__all__ = [
    "NAN_VALUE",
    "RangeValue",
    "Scalar",
    "String",
    "Value",
    "absent",
    "is_nan_value",
    "present",
    "settle",
    "stored_nan_samples",
]

_NAN_BITS = np.uint64(0x7FF8_0000_4E41_4E00)  # a quiet NaN with a payload no computation makes
_NEGATIVE_NAN_BITS = np.uint64(_NAN_BITS | 1 << 63)  # negation flips the sign bit
NAN_VALUE = float(np.array([_NAN_BITS], dtype=np.uint64).view(np.float64)[0])
"""The value of a sample that is NaN (``0/0``, ``sqrt(-1)``, the ``NaN`` literal), apart
from NaN itself, which marks "no sample" in the engine's matrices."""


def is_nan_value(values: np.ndarray) -> np.ndarray:
    """Where ``values`` hold :data:`NAN_VALUE` (either sign)."""
    bits = np.asarray(values, dtype=np.float64).view(np.uint64)
    flags: np.ndarray = (bits == _NAN_BITS) | (bits == _NEGATIVE_NAN_BITS)
    return flags


def absent(values: np.ndarray) -> np.ndarray:
    """Where ``values`` hold no sample: a NaN that is not :data:`NAN_VALUE`."""
    missing: np.ndarray = np.isnan(values)
    if np.count_nonzero(missing):  # a C count: ``any()`` costs a small query's arrays 3x as much
        missing &= ~is_nan_value(values)
    return missing


def present(values: np.ndarray) -> np.ndarray:
    """Where ``values`` hold a sample (a number, an infinity or :data:`NAN_VALUE`)."""
    return ~absent(values)


def stored_nan_samples(values: np.ndarray, gaps: np.ndarray | None = None) -> np.ndarray:
    """Stored values with each NaN sample (a NaN of other bits than NaN itself, which marks
    an empty bucket: Go's ``math.NaN()`` that remote write carries, say) as :data:`NAN_VALUE`;
    ``gaps``, when known, the only columns that hold a NaN."""
    if gaps is not None and len(gaps) < values.shape[1]:
        part = values[:, gaps]
        marked = stored_nan_samples(part)
        if marked is part:
            return values
        values = values.copy(order="K")
        values[:, gaps] = marked
        return values
    nan = np.isnan(values)
    if not nan.any():
        return values
    stored = nan & (values.view(np.uint64) != np.float64(np.nan).view(np.uint64))
    return np.where(stored, NAN_VALUE, values) if stored.any() else values


def settle(values: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """A computation's answer with ``missing`` cells NaN (no sample) and every other NaN
    :data:`NAN_VALUE` (a sample whose value is NaN)."""
    nan = np.isnan(values)
    if not np.count_nonzero(nan):
        return np.where(missing, np.nan, values) if np.count_nonzero(missing) else values
    return np.where(missing, np.nan, np.where(nan, NAN_VALUE, values))


@dataclass
class Scalar:
    values: np.ndarray  # one per evaluation time


@dataclass
class String:
    value: str


@dataclass
class RangeValue:
    """The samples of a range selector or subquery, and the window each evaluation time reads."""

    samples: Samples
    range_ms: int
    ends: np.ndarray  # the window's end per evaluation time (after offset and @)


Value = Matrix | RangeValue | Scalar | String
