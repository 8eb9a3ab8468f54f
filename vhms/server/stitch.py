"""Which buckets of which ring a sample read takes: the finest ring where it reaches, each
coarser ring only before the finer one's oldest kept bucket.

A read of samples (``Store.fetch(..., "auto", sample_times=True)``, what PromQL asks) over
``[start_ms, end_ms)`` is cut into pieces, oldest first::

    start_ms                                                             end_ms
       |  1 h ring  |      15 min ring      |  5 min ring  |   finest ring   |
                                            ^ stitch       ^ stitch: the finest ring's
                                                             oldest kept bucket

Each ring is read from the bucket that holds ``start_ms`` (or its oldest kept bucket, if
later) to the last bucket that ends at or before where the finer pieces begin (the finest
ring: to the bucket that holds ``end_ms - 1``). A coarse bucket that straddles a stitch is
left out: its aggregate mixes samples the finer ring still holds with ones it has dropped,
so the time between that bucket's start and the stitch (less than one coarse step) has no
sample. The rings cover each other in time, so every series is stitched at the same
instants; a series with no sample in a piece simply has none there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["Piece", "RingSpan", "stitch"]


class RingSpan(NamedTuple):
    """What a ring holds: its step and its oldest and newest kept bucket numbers
    (``newest`` -1: nothing yet)."""

    step_ms: int
    oldest: int
    newest: int


class Piece(NamedTuple):
    """Buckets ``first`` to ``last`` (numbers, inclusive) of ring ``ring`` (its index, 0 the finest)."""

    ring: int
    first: int
    last: int


def stitch(rings: Sequence[RingSpan], start_ms: int, end_ms: int) -> list[Piece]:
    """The pieces of a sample read over ``[start_ms, end_ms)``, oldest first (see the module
    doc): the finest ring alone when it reaches ``start_ms`` (or holds nothing yet); the
    coarsest ring's buckets when the whole range lies before every ring."""
    pieces: list[Piece] = []
    upper_ms: int | None = None  # where the finer pieces begin
    for index, ring in enumerate(rings):
        if index and ring.newest < 0:
            continue
        wanted = start_ms // ring.step_ms
        last = (end_ms - 1) // ring.step_ms if upper_ms is None else upper_ms // ring.step_ms - 1
        first = wanted if ring.newest < 0 else max(wanted, ring.oldest)
        if first <= last and (index == 0 or first <= ring.newest):
            pieces.append(Piece(index, first, last))
            upper_ms = first * ring.step_ms
        if ring.newest < 0 or wanted >= ring.oldest:
            break
    if not pieces:  # the range lies before every ring: the coarsest one's (empty) buckets
        step = rings[-1].step_ms
        return [Piece(len(rings) - 1, start_ms // step, (end_ms - 1) // step)]
    pieces.reverse()
    return pieces
