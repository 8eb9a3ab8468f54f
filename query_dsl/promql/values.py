"""What a PromQL expression evaluates to, over the evaluation times of a query.

- an instant vector: a :class:`~query_dsl.matrix.Matrix`, the engine's value type, on the
  evaluation times (NaN: the series has no sample at that time);
- a range vector: :class:`~query_dsl.promql.selection.Samples` with the window's range;
- a scalar: :class:`Scalar`, one value per evaluation time;
- a string: :class:`String`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from query_dsl.matrix import Matrix
from query_dsl.promql.selection import Samples

__all__ = ["RangeValue", "Scalar", "String", "Value"]


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
