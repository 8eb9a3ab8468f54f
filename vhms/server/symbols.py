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

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Protocol

import numpy as np

from bookkeeper import InvalidLabelError
from bookkeeper.ground import combine_hashes
from bookkeeper.wire import validate_name

__all__ = ["Resolved", "Vocabulary", "resolve", "row_hashes"]

NAME = "__name__"


@dataclass(frozen=True)
class Resolved:
    """The samples of a batch by shape: ``groups`` maps a shape number to the sample
    positions of that shape (ascending) and their rows of codes (``[samples, width]``
    int32, the name's code first)."""

    groups: dict[int, tuple[np.ndarray, np.ndarray]]


class Vocabulary(Protocol):
    """What the index gives a batch's resolution: codes, shapes and parsed pairs, each kept."""

    def code(self, label: str, value: str) -> int: ...

    def shape_number(self, shape: tuple[str, ...]) -> int: ...

    def pair_refs(self, tokens: list[str]) -> list[int]:
        """``label number << 32 | code`` of each ``k=v`` token (parsed once, remembered), -1
        for ``""``; ``InvalidLabelError`` for a token that does not parse."""
        ...

    def labels_by_number(self) -> list[str]:
        """Every label by its number (``__name__`` among them)."""
        ...


def resolve(
    vocabulary: Vocabulary,
    names: Sequence[str],
    label_sets: Sequence[str],
    name_ids: np.ndarray,
    set_ids: np.ndarray,
) -> Resolved:
    """Each referenced name and label set resolved once, then every sample's row by numpy.
    Raises ``InvalidNameError`` / ``InvalidLabelError`` for a name or a label set that does
    not parse."""
    name_codes = np.zeros(len(names), dtype=np.int32)
    for position in _present(name_ids, len(names)).tolist():
        name_codes[position] = vocabulary.code(NAME, validate_name(names[position]))
    used = _present(set_ids, len(label_sets))
    if len(used) == len(label_sets) and bool((used == np.arange(len(used))).all()):
        set_shapes, set_ranks, tables = _sets(vocabulary, label_sets)  # each set used, in order
    else:
        shapes, ranks, tables = _sets(vocabulary, [label_sets[i] for i in used.tolist()])
        set_shapes = np.zeros(len(label_sets), dtype=np.int64)
        set_ranks = np.zeros(len(label_sets), dtype=np.int64)
        set_shapes[used] = shapes
        set_ranks[used] = ranks
    groups: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    sample_shapes = set_shapes[set_ids] if len(tables) > 1 else None
    for number, table in tables.items():
        if sample_shapes is None:
            positions = np.arange(len(set_ids))
        else:
            positions = np.flatnonzero(sample_shapes == number)
        rows = np.empty((len(positions), table.shape[1] + 1), dtype=np.int32)
        rows[:, 0] = name_codes[name_ids[positions]]
        rows[:, 1:] = table[set_ranks[set_ids[positions]]]
        groups[number] = (positions, rows)
    return Resolved(groups)


def _sets(
    vocabulary: Vocabulary, texts: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """Per label-set text: its shape and its row among its shape's; per shape, the codes of
    its sets (``[sets, labels]``). The texts are cut at their commas (:func:`_tokens`) and only
    the distinct ``k=v`` tokens parsed (``vocabulary.pair_refs``, remembered across batches,
    asked once a batch by :class:`_Refs`);
    the tokens of a set whose labels are not in order (not canonical) are put in order by numpy."""
    shapes = np.zeros(len(texts), dtype=np.int64)
    ranks = np.zeros(len(texts), dtype=np.int64)
    if not len(texts):
        return shapes, ranks, {}
    tokens, offsets = _tokens(texts)
    refs = np.fromiter(map(_Refs(vocabulary).__getitem__, tokens), dtype=np.int64, count=len(tokens))
    if (refs < 0).any():
        refs, offsets = _without_empty_sets(refs, offsets, texts)
    names = vocabulary.labels_by_number()
    refs, offsets = _in_label_order(refs, offsets, names)
    counts = np.diff(offsets)
    numbers = refs >> 32
    codes = (refs & 0xFFFFFFFF).astype(np.int32)
    blocks: dict[int, list[np.ndarray]] = {}
    sizes: dict[int, int] = {}
    one_width = bool(counts.min() == counts.max())
    for width in _present(counts, int(counts.max()) + 1).tolist():
        if one_width:  # every set as wide: the tokens are a [sets, width] array as they lie
            members = np.arange(len(texts))
            label_numbers, set_codes = numbers.reshape(len(texts), width), codes.reshape(len(texts), width)
        else:
            members = np.flatnonzero(counts == width)
            at = offsets[members, None] + np.arange(width)
            label_numbers, set_codes = numbers[at], codes[at]
        while len(members):  # a pass per distinct shape of this width: a handful
            alike = (label_numbers == label_numbers[0]).all(axis=1)
            number = vocabulary.shape_number((NAME, *(names[n] for n in label_numbers[0].tolist())))
            chosen = members if alike.all() else members[alike]
            held = sizes.get(number, 0)
            sizes[number] = held + len(chosen)
            shapes[chosen] = number
            ranks[chosen] = np.arange(held, held + len(chosen))
            blocks.setdefault(number, []).append(set_codes if alike.all() else set_codes[alike])
            members, label_numbers, set_codes = members[~alike], label_numbers[~alike], set_codes[~alike]
    return shapes, ranks, {number: np.concatenate(block) for number, block in blocks.items()}


class _Refs(dict[str, int]):
    """A batch's tokens' references: a token met for the first time asks the vocabulary (so
    tokens get their codes in order of first appearance), the others are one lookup in C."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        super().__init__()
        self._vocabulary = vocabulary

    def __missing__(self, token: str) -> int:
        ref = self[token] = self._vocabulary.pair_refs([token])[0]
        return ref


def _tokens(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The ``k=v`` tokens of label-set texts, cut at every comma (a value's own commas are
    percent-encoded), and where each set's tokens begin (a text without a comma is one
    token, ``""`` an empty one): two C loops of ``str``'s, no Python code per token."""
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(
        np.fromiter(map(str.count, texts, repeat(",")), dtype=np.int64, count=len(texts)) + 1, out=offsets[1:]
    )
    return ",".join(texts).split(","), offsets


def _without_empty_sets(
    refs: np.ndarray, offsets: np.ndarray, texts: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """The tokens less the lone ``""`` of each label set without labels (its count then 0);
    ``InvalidLabelError`` for a set with an empty label among others."""
    counts = np.diff(offsets)
    lone = (counts == 1) & (refs[offsets[:-1]] < 0)  # every set has a token at least
    dropped = np.repeat(lone, counts)
    bad = np.flatnonzero((refs < 0) & ~dropped)
    if len(bad):
        text = texts[int(np.searchsorted(offsets, bad[0], side="right")) - 1]
        raise InvalidLabelError(f"label set {text!r} has an empty label")
    counts[lone] = 0
    kept = np.zeros(len(offsets), dtype=np.int64)
    np.cumsum(counts, out=kept[1:])
    return refs[~dropped], kept


def _in_label_order(refs: np.ndarray, offsets: np.ndarray, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The tokens of each set sorted by label name, a label given twice keeping its last
    value (as ``parse_labels`` reads a set); the same arrays when every set is in order
    already (a canonical text is)."""
    rank = np.empty(len(names), dtype=np.int64)
    rank[np.argsort(np.array(names, dtype=object))] = np.arange(len(names))
    label_rank = rank[refs >> 32]
    out_of_order = np.diff(label_rank) <= 0
    starts = offsets[1:-1]
    out_of_order[starts[(starts > 0) & (starts < len(refs))] - 1] = False  # a set's last, the next's first
    if not out_of_order.any():
        return refs, offsets
    set_of_token = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    order = np.lexsort((np.arange(len(refs)), label_rank, set_of_token))
    refs, label_rank, set_of_token = refs[order], label_rank[order], set_of_token[order]
    last = np.ones(len(refs), dtype=bool)
    last[:-1] = (set_of_token[:-1] != set_of_token[1:]) | (label_rank[:-1] != label_rank[1:])
    refs, set_of_token = refs[last], set_of_token[last]
    offsets = np.zeros(len(offsets), dtype=np.int64)
    np.cumsum(np.bincount(set_of_token, minlength=len(offsets) - 1), out=offsets[1:])
    return refs, offsets


def row_hashes(shape: int, rows: np.ndarray) -> np.ndarray:
    """An int64 hash per row of codes of one shape (never 0: the hash table's empty mark)."""
    hashes = np.full(len(rows), shape + 1, dtype=np.uint64)
    for column in rows.T:
        hashes = combine_hashes(hashes, column.astype(np.int64).astype(np.uint64) + np.uint64(1))
    out = hashes.view(np.int64)
    out[out == 0] = 1
    return out


def _present(ids: np.ndarray, size: int) -> np.ndarray:
    """The distinct values of ``ids`` (all in ``[0, size)``) in order of first appearance: the
    order in which their values get codes, whatever the order of the batch's tables."""
    if not len(ids):
        return np.zeros(0, dtype=np.int64)
    first = np.full(size, len(ids), dtype=np.int64)
    np.minimum.at(first, ids, np.arange(len(ids)))
    present = np.flatnonzero(first < len(ids))
    firsts = first[present]
    if (firsts[1:] < firsts[:-1]).any():
        present = present[np.argsort(firsts, kind="stable")]
    return present
