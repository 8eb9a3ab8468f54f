"""The compressed column form of a closed block (``vhms/server/codec.py``) gives back the
very stored bits it was made of, over random blocks of every kind a series can take
(decimal at every scale, flat, counters, raw floats with and without trailing zero bytes,
infinities, ``-0.0``, NaN, empty, gappy), joined from slices as the finest ring seals them,
and read whole, by any subset of columns, in any order, or past the block's series."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vhms.server.codec import encode_block, join_blocks
from vhms.server.rings import encode_values


def _column(rng: np.random.Generator, k: int) -> np.ndarray:
    """One series' ``k`` values (NaN: empty), of a kind drawn at random."""
    kind = int(rng.integers(0, 9))
    if kind == 0:  # decimal at a random scale
        scale = int(rng.integers(0, 13))
        column = rng.integers(-(10**6), 10**6, size=k) / 10.0**scale
    elif kind == 1:  # flat
        column = np.full(k, float(rng.integers(-50, 50)))
    elif kind == 2:  # a counter, with a reset
        column = np.cumsum(rng.integers(0, 1000, size=k)).astype(np.float64)
        column[k // 2 :] -= column[k // 2]
    elif kind == 3:  # raw floats
        column = rng.normal(size=k) * 1e3
    elif kind == 4:  # raw floats whose low bytes are zero
        column = (rng.normal(size=k).view(np.uint64) & ~np.uint64(0xFFFF)).view(np.float64)
    elif kind == 5:  # specials
        column = rng.choice(np.array([np.inf, -np.inf, -0.0, 0.0, 1.5, 2.0**60]), size=k)
    elif kind == 6:  # never written
        return np.full(k, np.nan)
    elif kind == 7:  # large integers, past the decimal range
        column = rng.integers(2**52, 2**62, size=k).astype(np.float64)
    else:  # a constant raw value
        column = np.full(k, float(rng.normal()))
    if rng.random() < 0.3:  # gaps: empty buckets among written ones
        column = np.where(rng.random(k) < 0.3, np.nan, column)
    return column


def _stored(seed: int, k: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = np.stack([_column(rng, k) for _ in range(n)], axis=1)
    return encode_values(values)


@pytest.mark.parametrize("seed", range(12))
def test_a_block_decodes_to_the_bits_it_was_made_of(seed: int) -> None:
    rng = np.random.default_rng(seed)
    k, n = int(rng.integers(1, 30)), int(rng.integers(1, 300))
    stored = _stored(seed, k, n)
    block = encode_block(stored)
    assert np.array_equal(block.decode(np.arange(n)), stored)
    picked = np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False))
    assert np.array_equal(block.decode(picked), stored[:, picked])
    shuffled = rng.permutation(n)
    assert np.array_equal(block.decode(shuffled), stored[:, shuffled])
    past = np.array([0, n, n + 5])  # series newer than the block read as empty
    expected = np.zeros((k, 3), dtype=np.uint64)
    expected[:, 0] = stored[:, 0]
    assert np.array_equal(block.decode(past), expected)


@pytest.mark.parametrize("seed", range(4))
def test_a_block_joined_from_slices_decodes_as_one(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    k, n = 24, 700
    stored = _stored(100 + seed, k, n)
    cuts = [0, *sorted(rng.choice(np.arange(1, n), size=4, replace=False).tolist()), n]
    parts = [(low, encode_block(stored[:, low:high])) for low, high in itertools.pairwise(cuts)]
    block = join_blocks(parts, n)
    assert np.array_equal(block.decode(np.arange(n)), stored)
    picked = np.sort(rng.choice(n, size=50, replace=False))
    assert np.array_equal(block.decode(picked), stored[:, picked])
