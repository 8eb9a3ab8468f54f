"""Quantiles as PromQL computes them: ``q`` below 0 is -Inf, above 1 +Inf, NaN is NaN;
otherwise linear interpolation between the two closest ranks (``rank = q * (n - 1)``,
``lower * (1 - weight) + upper * weight`` as Prometheus writes it). NaN cells are absent
values. One sort for every row at once: numpy's ``nanquantile`` walks the rows in Python."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["quantile_of"]


def quantile_of(q: float | np.ndarray, values: np.ndarray, axis: int) -> np.ndarray:
    """The ``q`` quantile along ``axis`` (``q`` one number, or one per row of the answer),
    NaN where a row has no value."""
    rows = np.moveaxis(values, axis, -1)
    count = (~np.isnan(rows)).sum(axis=-1)
    wanted = np.broadcast_to(np.asarray(q, dtype=np.float64), count.shape)
    ranked = np.sort(rows, axis=-1)  # NaN sorts last
    rank = np.clip(np.where(np.isnan(wanted), 0.0, wanted), 0, 1) * (np.maximum(count, 1) - 1)
    lower = np.floor(rank).astype(np.int64)
    upper = np.minimum(lower + 1, np.maximum(count - 1, 0))
    weight = rank - lower
    low = np.take_along_axis(ranked, lower[..., None], axis=-1)[..., 0]
    high = np.take_along_axis(ranked, upper[..., None], axis=-1)[..., 0]
    with np.errstate(all="ignore"):
        result = low * (1 - weight) + high * weight
    result = np.where(wanted < 0, -math.inf, np.where(wanted > 1, math.inf, result))
    return np.where((count > 0) & ~np.isnan(wanted), result, np.nan)
