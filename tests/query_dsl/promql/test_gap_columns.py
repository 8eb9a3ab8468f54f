"""A fetch's samples know the columns that hold a NaN (``Samples.gaps``), and what looks
for NaN reads only those: the stale markers found, the NaN samples marked and the first
bucket from which every series has a sample are what a look at every cell finds, over
random blocks (leading empty buckets, holes, stale markers, NaN samples of other bits)."""

from __future__ import annotations

import numpy as np
import pytest

from query_dsl.promql.instant import _dense_from
from query_dsl.promql.selection import STALE_BITS, _stale_markers
from query_dsl.promql.values import stored_nan_samples

GO_NAN_BITS = 0x7FF8_0000_0000_0001


def _block(seed: int) -> np.ndarray:
    """``[series, buckets]`` values, time-major underneath as a store's read is."""
    rng = np.random.default_rng(seed)
    series, buckets = int(rng.integers(1, 30)), int(rng.integers(1, 25))
    values = rng.normal(size=(buckets, series)).T  # a transposed view, as the store answers
    lead = int(rng.integers(0, buckets + 1)) if rng.random() < 0.6 else 0
    values[:, :lead] = np.nan
    bits = values.view(np.uint64)
    for kind, share in ((np.float64(np.nan).view(np.uint64), 0.05), (STALE_BITS, 0.02), (GO_NAN_BITS, 0.02)):
        if rng.random() < 0.5:
            cells = rng.random(values.shape) < share
            bits[cells] = np.uint64(kind)
    return values


@pytest.mark.parametrize("seed", range(60))
def test_what_reads_the_gap_columns_finds_what_reading_every_cell_finds(seed: int) -> None:
    values = _block(seed)
    nan = np.isnan(values)
    gaps = np.flatnonzero(nan.any(axis=0))
    every = np.arange(values.shape[1])
    stale, stale_everywhere = _stale_markers(values, nan, gaps), _stale_markers(values, nan, every)
    assert (stale is None) == (stale_everywhere is None)
    if stale is not None:
        assert np.array_equal(stale, stale_everywhere)
        values = np.where(stale, np.nan, values)
    marked = stored_nan_samples(values, gaps)
    assert np.array_equal(marked.view(np.uint64), stored_nan_samples(values).view(np.uint64))
    if stale is None:
        assert _dense_from(marked, gaps) == _dense_from(marked, None)
