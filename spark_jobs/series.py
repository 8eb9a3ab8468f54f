"""Caches of what derives from the series keys of a landing record's samples.

A sample's series key is the one series identity of ``bookkeeper.wire.series_keys`` (the
record's common labels and the variable's own label set merged). An endpoint sends the same
names, label sets and order round after round, so what derives from a record's keys (the
Arrow string array that ``explode`` writes, the digests ``dedupe`` remembers) is cached by a
fingerprint of the record's *shape*: everything the keys derive from.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import numpy as np

__all__ = ["ShapeCache", "digests"]

T = TypeVar("T")


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
