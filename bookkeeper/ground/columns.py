"""Series identity by columns, as every package past the app reads it.

**Label columns.** The names (label ``"__name__"``) and labels of S series are held by
columns: per label, a :class:`LabelColumn`, its distinct values (a list, read and never
changed) and an int32 code per series into them, ``-1`` where the series lacks the label.
Equal codes in one column mean equal values; codes of two columns meet through their values
(:func:`translate`, :func:`concat`). A store's fetch answers them, the sharded client merges
the shards' answers with them, and the query engine joins and groups series with them
(:func:`row_keys`, :func:`dense_classes`): numpy over codes, never a dict per series.

**The series hash.** A series is its name and its sorted labels (the batch's common labels
included, the sample's own winning). :func:`series_hashes` gives each sample of a batch a
64-bit hash from the batch's columns: each distinct name and each distinct label set is
hashed once (BLAKE2b, 8 bytes, of its UTF-8 text: the name, the canonical label text of
``bookkeeper.labels.format_labels``), and the two are combined per sample in numpy
(:func:`combine_hashes`, a splitmix64 finaliser). :func:`key_hashes` gives the same hash
from canonical keys ``name{labels}``: the same series has the same hash whatever batch or
form it came in. Placement (``vhms.HashRing``) and Spark's deduplication both use it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from bookkeeper.wire import merged_label_texts

__all__ = [
    "KEY_LIMIT",
    "LabelColumn",
    "LabelColumns",
    "combine_hashes",
    "concat",
    "dense_classes",
    "key_hashes",
    "row_keys",
    "series_hashes",
    "text_hashes",
    "translate",
]

KEY_LIMIT = 1 << 62  # mixed-radix row keys are renumbered densely before they could pass this
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


class LabelColumn(NamedTuple):
    """Distinct ``values`` and a code per series into them (int32, ``-1``: absent)."""

    values: list[str]
    codes: np.ndarray

    def take(self, rows: np.ndarray) -> LabelColumn:
        """The series ``rows`` (compacted)."""
        return LabelColumn(self.values, self.codes[rows]).compact()

    def compact(self) -> LabelColumn:
        """Only the values some series uses, when the values outnumber the series (a few
        series of a store with many values): what reads the column then costs what the
        series do."""
        values, codes = self
        if len(values) <= len(codes):
            return self
        present = codes >= 0
        used = np.unique(codes[present])
        out = np.full(len(codes), -1, dtype=np.int32)
        out[present] = np.searchsorted(used, codes[present])
        return LabelColumn([values[code] for code in used.tolist()], out)

    def objects(self) -> np.ndarray:
        """The value of each series as an object array, None where absent."""
        lookup = np.array([*self.values, None], dtype=object)  # code -1 picks the trailing None
        picked: np.ndarray = lookup[self.codes]
        return picked

    @classmethod
    def absent(cls, size: int) -> LabelColumn:
        """A column that ``size`` series all lack."""
        return cls([], np.full(size, -1, dtype=np.int32))


LabelColumns = dict[str, LabelColumn]


class _Joint:
    """One numbering of the values of several columns, the first column's kept as they are."""

    def __init__(self, first: LabelColumn) -> None:
        self.values = list(first.values)
        self.index = {value: code for code, value in enumerate(first.values)}

    def codes(self, column: LabelColumn) -> np.ndarray:
        mapping = np.empty(len(column.values) + 1, dtype=np.int32)
        for code, value in enumerate(column.values):
            joint = self.index.setdefault(value, len(self.index))
            if joint == len(self.values):
                self.values.append(value)
            mapping[code] = joint
        mapping[-1] = -1  # absent stays absent
        translated: np.ndarray = mapping[column.codes]
        return translated


def translate(left: LabelColumn, right: LabelColumn) -> tuple[list[str], np.ndarray]:
    """Values covering both columns (the left's first, its codes unchanged) and the right's
    codes into them."""
    if left.values is right.values:
        return left.values, right.codes
    joint = _Joint(left)
    codes = joint.codes(right)
    return joint.values, codes


def concat(columns: Sequence[LabelColumn]) -> LabelColumn:
    """The series of ``columns`` one after the other, in one numbering (the first's kept)."""
    if not columns:
        return LabelColumn([], np.zeros(0, dtype=np.int32))
    joint = _Joint(columns[0])
    codes = [columns[0].codes, *(joint.codes(column) for column in columns[1:])]
    return LabelColumn(joint.values, np.concatenate(codes).astype(np.int32, copy=False))


def row_keys(columns: Iterable[LabelColumn], size: int) -> np.ndarray:
    """An int64 per series (``size`` of them), equal exactly when the series agree on every
    column (a missing label is a value of its own): mixed-radix over the codes, renumbered
    densely before the key could overflow."""
    keys = np.zeros(size, dtype=np.int64)
    span = 1
    for column in columns:
        radix = len(column.values) + 1
        if span * radix >= KEY_LIMIT:
            keys = dense_classes(keys)[0]
            span = int(keys.max()) + 1 if len(keys) else 1
        keys = keys * radix + (column.codes + 1)
        span *= radix
    return keys


def dense_classes(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Renumber keys 0, 1, ... in order of first appearance; also each class's first row."""
    if not len(keys):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    by_appearance = np.argsort(first, kind="stable")
    rank = np.empty(len(first), dtype=np.int64)
    rank[by_appearance] = np.arange(len(first))
    return rank[inverse.reshape(-1)], first[by_appearance]


# -- the series hash ---------------------------------------------------------------------------


def text_hashes(texts: Sequence[str]) -> np.ndarray:
    """A uint64 per text: BLAKE2b (8 bytes, read little-endian) of its UTF-8, the same in
    every process (unlike ``hash``)."""
    return np.frombuffer(
        b"".join(hashlib.blake2b(text.encode(), digest_size=8).digest() for text in texts), dtype="<u8"
    ).astype(np.uint64)


def combine_hashes(name_hashes: np.ndarray, label_hashes: np.ndarray) -> np.ndarray:
    """The series hash of each (name hash, label-set hash) pair: a splitmix64 finaliser of
    the two, so that a series' hash depends on both and bits of each reach every bit."""
    with np.errstate(over="ignore"):
        z = name_hashes.astype(np.uint64) ^ (label_hashes.astype(np.uint64) * _GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * _MIX_1
        z = (z ^ (z >> np.uint64(27))) * _MIX_2
    mixed: np.ndarray = z ^ (z >> np.uint64(31))
    return mixed


def series_hashes(
    common: Mapping[str, str],
    names: Sequence[str],
    label_sets: Sequence[str],
    name_ids: np.ndarray,
    set_ids: np.ndarray,
) -> np.ndarray:
    """The series hash (uint64) of each sample of a batch given by columns (see the module
    doc): each name and label set hashed once, combined per sample. ``ValueError`` for an id
    out of its list."""
    for ids, table, what in ((name_ids, names, "name"), (set_ids, label_sets, "label set")):
        if len(ids) and (ids.min() < 0 or ids.max() >= len(table)):
            raise ValueError(f"a {what} id out of the {len(table)} {what}s")
    name_hashes = text_hashes(names)
    label_hashes = text_hashes(merged_label_texts(common, label_sets))
    return combine_hashes(name_hashes[name_ids], label_hashes[set_ids])


def key_hashes(keys: Sequence[str]) -> np.ndarray:
    """The series hash (uint64) of canonical keys ``name{labels}``, equal to
    :func:`series_hashes` of the same series."""
    names = []
    bodies = []
    for key in keys:
        name, _, rest = key.partition("{")
        names.append(name)
        bodies.append(rest[:-1])
    return combine_hashes(text_hashes(names), text_hashes(bodies))
