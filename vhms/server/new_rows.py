"""The rows of a batch that the index did not find, made ready to become new series: each
distinct row once, in order of first appearance, and the order that groups new series by
the code of a label (for the postings). No sort of the rows' positions: distinct hashes
(one ``np.sort`` tells) are distinct rows, and only when two rows hash alike are they made
distinct by ``np.unique`` (by their hashes, by themselves when two rows share one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["NewRows", "grouping_order", "new_rows"]


@dataclass(frozen=True)
class NewRows:
    """The rows of one shape a batch does not find: each distinct row once, in order of first
    appearance (``rows``, ``hashes``, their ``firsts`` positions in the batch, and ``clash``
    where another row holds the hash), and for each occurrence (at ``where`` in the batch)
    its number among them (``inverse``)."""

    shape: int
    firsts: np.ndarray
    rows: np.ndarray
    hashes: np.ndarray
    clash: np.ndarray
    where: np.ndarray
    inverse: np.ndarray


def new_rows(
    shape: int, where: np.ndarray, rows: np.ndarray, hashes: np.ndarray, taken: np.ndarray
) -> NewRows:
    """The distinct rows among ``rows`` (at ``where`` in the batch; ``taken``: hashes held by
    stored series), as the module doc says."""
    ordered = np.sort(hashes)
    if not (ordered[1:] == ordered[:-1]).any():
        everyone = np.arange(len(rows))
        return NewRows(shape, where, rows, hashes, taken, where, everyone)
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not (rows[first][inverse] == rows).all():  # a hash shared by two rows: rare
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    by_appearance = np.argsort(first)
    rank = np.empty(len(first), dtype=np.int64)
    rank[by_appearance] = np.arange(len(first))
    first = first[by_appearance]
    clash = taken[first]
    _, earliest = np.unique(hashes[first], return_index=True)
    if len(earliest) < len(first):  # a later row of a hash an earlier row holds is kept aside
        later = np.ones(len(first), dtype=bool)
        later[earliest] = False
        clash |= later
    return NewRows(shape, where[first], rows[first], hashes[first], clash, where, rank[inverse])


def grouping_order(codes: np.ndarray) -> np.ndarray:
    """A stable order of ``codes`` (int32, none negative) by value: numpy's radix sort of
    16-bit keys, twice for codes beyond 16 bits (low half, then high half)."""
    if not len(codes) or codes.max() < 1 << 16:
        return np.argsort(codes.astype(np.uint16), kind="stable")
    order = np.argsort((codes & 0xFFFF).astype(np.uint16), kind="stable")
    return order[np.argsort((codes[order] >> 16).astype(np.uint16), kind="stable")]
