"""Quantiles as PromQL computes them: ``q`` below 0 is -Inf, above 1 +Inf, NaN is NaN;
otherwise linear interpolation between the two closest ranks (``rank = q * (n - 1)``,
``lower * (1 - weight) + upper * weight`` as Prometheus writes it). NaN cells are absent
values. One sort for every row at once: numpy's ``nanquantile`` walks the rows in Python."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["quantile_of"]


def quantile_of(q: float, values: np.ndarray, axis: int) -> np.ndarray:
    """The ``q`` quantile along ``axis``, NaN where a row has no value."""
    rows = np.moveaxis(values, axis, -1)
    count = (~np.isnan(rows)).sum(axis=-1)
    if math.isnan(q):
        result = np.full(count.shape, np.nan)
    elif q < 0 or q > 1:
        result = np.full(count.shape, -math.inf if q < 0 else math.inf)
    else:
        ranked = np.sort(rows, axis=-1)  # NaN sorts last
        rank = q * (np.maximum(count, 1) - 1)
        lower = np.floor(rank).astype(np.int64)
        upper = np.minimum(lower + 1, np.maximum(count - 1, 0))
        weight = rank - lower
        low = np.take_along_axis(ranked, lower[..., None], axis=-1)[..., 0]
        high = np.take_along_axis(ranked, upper[..., None], axis=-1)[..., 0]
        with np.errstate(all="ignore"):
            result = low * (1 - weight) + high * weight
    return np.where(count > 0, result, np.nan)
