"""Quantiles as PromQL computes them: ``q`` below 0 is -Inf, above 1 +Inf, NaN is NaN;
otherwise linear interpolation between the two closest ranks (``rank = q * (n - 1)``),
which is numpy's default ("linear") method. NaN cells are absent values."""

from __future__ import annotations

import math
import warnings

import numpy as np

__all__ = ["quantile_of"]


def quantile_of(q: float, values: np.ndarray, axis: int) -> np.ndarray:
    """The ``q`` quantile along ``axis``, NaN where a row has no value."""
    present = (~np.isnan(values)).any(axis=axis)
    if math.isnan(q):
        result = np.full(present.shape, np.nan)
    elif q < 0 or q > 1:
        result = np.full(present.shape, -math.inf if q < 0 else math.inf)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows
            result = np.nanquantile(values, q, axis=axis)
    return np.where(present, result, np.nan)
