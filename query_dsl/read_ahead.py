"""Blocks of a large read, each read while the caller works on the one before.

A query over many series reads them a block at a time and reduces (or writes) each block
before it asks for the next (``promql.selection.fetch_blocks``), so that no array grows with
the series. The read of a block (the store's decode of its sealed blocks, the copy into
the answer's arrays) and the work on it (an instant selector's pick, a reduction by class)
are each about half of such a query, and most of both is numpy with the GIL released: with
the next block read in a thread of its own while the caller works on the current one, the
two halves overlap on a machine's second core. The reader alternates two buffers (0 and 1):
a caller is done with a block when it asks for the next, so the block read then can take
the buffer of the one before it. At most one read is ahead of the caller, so a query holds
the samples of two blocks at a time, as it did with the read and the reduced one.

A read of one block (every small query's) runs inline: no thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

__all__ = ["read_ahead"]

T = TypeVar("T")


def read_ahead(read: Callable[[int, int], T], starts: Sequence[int]) -> Iterator[tuple[int, T]]:
    """Each of ``starts`` with ``read(start, buffer)``, in order, the read of the next one
    running in a thread while the caller holds the current one (see the module doc). An
    exception of a read is raised where its block is asked for; a caller that stops early
    (an error, its deadline) returns once the read ahead of it has finished."""
    if len(starts) < 2:
        for start in starts:
            yield start, read(start, 0)
        return
    pending: Future[T] | None = None
    with ThreadPoolExecutor(1, thread_name_prefix="read-ahead") as reader:
        try:
            current = read(starts[0], 0)
            for i, start in enumerate(starts):
                following = i + 1 < len(starts)
                pending = reader.submit(read, starts[i + 1], (i + 1) % 2) if following else None
                yield start, current
                if pending is not None:
                    current = pending.result()
                    pending = None
        finally:
            if pending is not None:  # the caller stopped early: its buffer is not touched after
                pending.cancel()
                wait([pending])
