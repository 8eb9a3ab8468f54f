"""Series keys of a landing record's samples, and caches of what derives from them.

A sample's series key is ``name{labels}`` with the record's common (framework) labels and
the variable's own label set merged, the variable's own winning
(``bookkeeper.labels.format_series``). An endpoint sends the same names, label sets and
order round after round, so what derives from a record's keys (the Arrow string array that
``explode`` writes, the digests ``dedupe`` remembers) is cached by a fingerprint of the
record's *shape*: everything the keys derive from.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Generic, TypeVar

import numpy as np

from bookkeeper.labels import format_labels, parse_labels

__all__ = ["ShapeCache", "digests", "series_keys"]

T = TypeVar("T")


@lru_cache(maxsize=1 << 18)  # label sets repeat across the endpoints of an application
def _label_items(text: str) -> tuple[tuple[str, str], ...]:
    """A label set's canonical ``key=value`` items by key: merging items keeps the canonical
    form (``format_labels``) without escaping the values again."""
    canonical = format_labels(parse_labels(text))
    return tuple((item.partition("=")[0], item) for item in canonical.split(",")) if canonical else ()


def series_keys(
    common: Mapping[str, str],
    names: Sequence[str],
    label_sets: Sequence[str],
    name_ids: np.ndarray,
    set_ids: np.ndarray,
) -> list[str]:
    """The key of each sample (``name_ids[i]``, ``set_ids[i]``); ``ValueError`` for an id
    out of its list."""
    if len(name_ids) != len(set_ids):
        raise ValueError(f"{len(name_ids)} name ids but {len(set_ids)} label set ids")
    if len(name_ids) and (name_ids.min() < 0 or name_ids.max() >= len(names)):
        raise ValueError(f"a name id out of the {len(names)} names")
    if len(set_ids) and (set_ids.min() < 0 or set_ids.max() >= len(label_sets)):
        raise ValueError(f"a label set id out of the {len(label_sets)} label sets")
    common_items = dict(_label_items(format_labels(common)))
    bodies = []
    for text in label_sets:
        merged = common_items.copy()
        merged.update(_label_items(text))
        bodies.append(",".join(merged[key] for key in sorted(merged)))
    return [f"{names[n]}{{{bodies[s]}}}" for n, s in zip(name_ids.tolist(), set_ids.tolist(), strict=True)]


def digests(keys: Sequence[str]) -> np.ndarray:
    """A 64-bit digest of each key (BLAKE2b: the same in every process, unlike ``hash``)."""
    return np.frombuffer(
        b"".join(hashlib.blake2b(key.encode(), digest_size=8).digest() for key in keys), dtype="<u8"
    )


class ShapeCache(Generic[T]):
    """Values by record shape (a fingerprint), the least recently used dropped past
    ``budget`` bytes as measured by ``size``."""

    def __init__(self, budget: int, size: Callable[[T], int]) -> None:
        self.budget = budget
        self.size = size
        self.used = 0
        self.entries: OrderedDict[bytes, T] = OrderedDict()

    def get(self, shape: bytes, build: Callable[[], T]) -> T:
        value = self.entries.get(shape)
        if value is not None:
            self.entries.move_to_end(shape)
            return value
        value = build()
        self.entries[shape] = value
        self.used += self.size(value)
        while self.used > self.budget and len(self.entries) > 1:
            self.used -= self.size(self.entries.popitem(last=False)[1])
        return value
