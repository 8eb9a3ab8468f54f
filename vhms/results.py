"""What a fetch answers, as the client side reads it: series as label columns
(``bookkeeper.ground.LabelColumns``), bucket times and values (:class:`FetchResult`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from bookkeeper.ground import LabelColumn, LabelColumns
from bookkeeper.wire import format_series, parse_series

__all__ = ["NAME", "CoarseSpan", "FetchResult"]

NAME = "__name__"  # the label that holds a series' name in label columns


class CoarseSpan(NamedTuple):
    """Buckets a sample read took from a ring coarser than the finest, where the finest does
    not reach back: that ring's step, its first bucket's start and its last bucket's end
    (epoch ms). Their samples are the ring's aggregates, each at its bucket's start."""

    step_ms: int
    start_ms: int
    end_ms: int


@dataclass
class FetchResult:
    """What a fetch answers: series by columns, bucket start times (epoch ms) and values
    ``[series, buckets]`` with NaN for gaps (from a store: a transposed view of a time-major
    array, Fortran order).

    ``labels`` holds the names (label ``"__name__"``) and every label of the series by
    columns (``bookkeeper.ground.LabelColumn``): per label, its values by code (a list to
    read, never to change) and an int32 code per series, -1 where the series lacks the label.
    """

    labels: LabelColumns
    timestamps: np.ndarray
    values: np.ndarray
    step_ms: int
    # with ``sample_times=True`` from the finest ring: each value's own time (epoch ms,
    # ``[series, buckets]``, the bucket's start where there is no value or the bucket is a
    # coarser ring's)
    sample_times: np.ndarray | None = None
    # a sample read stitched from several rings (``timestamps`` then not evenly spaced; the
    # finest ring's buckets last): the spans read from coarser rings, oldest first
    coarse_spans: tuple[CoarseSpan, ...] = ()

    def __len__(self) -> int:
        return int(self.values.shape[0])

    @property
    def keys(self) -> list[str]:
        """The canonical key of each series (made one by one: for tools and tests)."""
        return [format_series(name, labels) for name, labels in self.series()]

    def series(self) -> list[tuple[str, dict[str, str]]]:
        """``(name, labels)`` of each series (one dict each: for tools and tests)."""
        if NAME not in self.labels:
            return []
        columns = [(label, values, codes.tolist()) for label, (values, codes) in self.labels.items()]
        out: list[tuple[str, dict[str, str]]] = []
        for row in range(len(self)):
            found = {label: values[codes[row]] for label, values, codes in columns if codes[row] >= 0}
            out.append((found.pop(NAME), found))
        return out

    @classmethod
    def from_keys(
        cls, keys: list[str], timestamps: np.ndarray, values: np.ndarray, step_ms: int
    ) -> FetchResult:
        """A result from canonical keys (parsed one by one: for a few series)."""
        columns: dict[str, dict[str, int]] = {NAME: {}}
        codes: dict[str, np.ndarray] = {NAME: np.full(len(keys), -1, dtype=np.int32)}
        for row, key in enumerate(keys):
            name, labels = parse_series(key)
            for label, value in ((NAME, name), *labels.items()):
                if label not in columns:
                    columns[label] = {}
                    codes[label] = np.full(len(keys), -1, dtype=np.int32)
                codes[label][row] = columns[label].setdefault(value, len(columns[label]))
        return cls(
            {label: LabelColumn(list(columns[label]), codes[label]) for label in columns},
            timestamps,
            values,
            step_ms,
        )

    @classmethod
    def empty(cls, step_ms: int = 60_000) -> FetchResult:
        return cls({NAME: LabelColumn.absent(0)}, np.zeros(0, dtype=np.int64), np.zeros((0, 0)), step_ms)
