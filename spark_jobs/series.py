"""A cache of what derives from the series of a landing record's samples.

A sample's series is the one series identity of ``bookkeeper.ground`` (the record's common
labels and the variable's own label set merged; its hash, ``series_hashes``, is the one
placement uses). An endpoint sends the same names, label sets and order round after round,
so what derives from a record's series (the Arrow string array of keys that ``explode``
writes, the hashes ``dedupe`` remembers) is cached by a fingerprint of the record's
*shape*: everything the series derive from.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["ShapeCache"]

T = TypeVar("T")


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
