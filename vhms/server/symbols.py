"""A batch's symbol table resolved into the index's codes: what replaced cutting key strings
into tokens (issue 26).

An ingest batch names its series by columns: names and label sets (canonical label texts)
once, a ``(name id, label-set id)`` reference per sample (``bookkeeper.wire.IngestColumns``).
The index resolves each *distinct* name and label set of the batch once: a name is
validated and coded; a label set is parsed (``bookkeeper.labels.parse_labels``, whose cache
keeps the parse across rounds), its labels sorted into a *shape* (``("__name__", labels...)``)
and its values coded. A series is then its shape and its row of codes (name first), made for
every sample by numpy from the per-set rows: no text per sample, ever.

A row's hash (:func:`row_hashes`) is what the index's hash table finds; the row itself is
what confirms a hit (the index keeps every series' row, by shape).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bookkeeper.ground import combine_hashes
from bookkeeper.wire import parse_labels, validate_name

__all__ = ["Resolved", "resolve", "row_hashes"]


@dataclass(frozen=True)
class Resolved:
    """The samples of a batch by shape: ``groups`` maps a shape number to the sample
    positions of that shape (ascending) and their rows of codes (``[samples, width]``
    int32, the name's code first)."""

    groups: dict[int, tuple[np.ndarray, np.ndarray]]


def resolve(
    names: Sequence[str],
    label_sets: Sequence[str],
    name_ids: np.ndarray,
    set_ids: np.ndarray,
    code: Callable[[str, str], int],
    shape_number: Callable[[tuple[str, ...]], int],
) -> Resolved:
    """Each referenced name and label set resolved once (``code(label, value)`` and
    ``shape_number(shape)`` are the index's), then every sample's row by numpy. Raises
    ``InvalidNameError`` / ``InvalidLabelError`` for a name or a label set that does not parse."""
    name_codes = np.zeros(len(names), dtype=np.int32)
    for position in _present(name_ids, len(names)):
        name_codes[position] = code("__name__", validate_name(names[position]))
    set_shapes = np.zeros(len(label_sets), dtype=np.int64)
    set_rank = np.zeros(len(label_sets), dtype=np.int64)  # the set's row among its shape's sets
    by_shape: dict[int, list[list[int]]] = {}
    for position in _present(set_ids, len(label_sets)):
        labels = parse_labels(label_sets[position])
        ordered = sorted(labels)
        number = shape_number(("__name__", *ordered))
        members = by_shape.setdefault(number, [])
        set_shapes[position] = number
        set_rank[position] = len(members)
        members.append([code(label, labels[label]) for label in ordered])
    sample_shapes = set_shapes[set_ids]
    groups: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for number, set_rows in by_shape.items():
        positions = np.flatnonzero(sample_shapes == number) if len(by_shape) > 1 else np.arange(len(set_ids))
        width = len(set_rows[0]) + 1
        table = np.array(set_rows, dtype=np.int32).reshape(len(set_rows), width - 1)
        rows = np.empty((len(positions), width), dtype=np.int32)
        rows[:, 0] = name_codes[name_ids[positions]]
        rows[:, 1:] = table[set_rank[set_ids[positions]]]
        groups[number] = (positions, rows)
    return Resolved(groups)


def row_hashes(shape: int, rows: np.ndarray) -> np.ndarray:
    """An int64 hash per row of codes of one shape (never 0: the hash table's empty mark)."""
    hashes = np.full(len(rows), shape + 1, dtype=np.uint64)
    for column in rows.T:
        hashes = combine_hashes(hashes, column.astype(np.int64).astype(np.uint64) + np.uint64(1))
    out = hashes.view(np.int64)
    out[out == 0] = 1
    return out


def _present(ids: np.ndarray, size: int) -> list[int]:
    """The distinct values of ``ids`` (all in ``[0, size)``) in order of first appearance: the
    order in which their values get codes, whatever the order of the batch's tables."""
    if not len(ids):
        return []
    first = np.full(size, len(ids), dtype=np.int64)
    np.minimum.at(first, ids, np.arange(len(ids)))
    present = np.flatnonzero(first < len(ids))
    ordered: list[int] = present[np.argsort(first[present], kind="stable")].tolist()
    return ordered
