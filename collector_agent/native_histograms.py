"""A remote-write 2.0 native histogram with custom buckets (schema -53, Prometheus's "NHCB",
what a Prometheus 3 makes of a classic histogram with ``convert_classic_histograms_to_nhcb``)
read as the bookkeeper's histogram series: ``<name>_bucket{le=...}`` cumulative, ``le``
written as :func:`bookkeeper.format_bound` writes it, ``<name>_sum`` and ``<name>_count``.

Its buckets are the ``custom_values`` bounds and ``+Inf``, indexed from 0; the populated ones
are given by ``positive_spans`` (an offset from where the previous span ended, a length),
their counts by ``positive_deltas`` (an integer histogram: each count the previous one plus
its delta, across spans) or ``positive_counts`` (a float histogram). A bucket no span
covers holds 0. Exponential schemas (-4 to 8) have no fixed bounds to name: they are
refused with their series, as in remote write 1.0.
"""

from __future__ import annotations

import itertools
import math
import struct
from typing import Any

from bookkeeper import format_bound

__all__ = ["CUSTOM_BUCKETS_SCHEMA", "custom_buckets", "is_stale", "total"]

CUSTOM_BUCKETS_SCHEMA = -53
_STALE = struct.pack("<Q", 0x7FF0000000000002)


def custom_buckets(histogram: Any) -> list[tuple[str, float]] | None:
    """``[(le, cumulative count)]`` of a custom-buckets histogram, ``+Inf`` last, or ``None``
    for another schema or spans that do not fit its buckets or counts."""
    if histogram.schema != CUSTOM_BUCKETS_SCHEMA:
        return None
    bounds = [*histogram.custom_values, math.inf]
    if any(not later > earlier for earlier, later in itertools.pairwise(bounds)):
        return None
    given = list(histogram.positive_counts) or list(itertools.accumulate(histogram.positive_deltas))
    counts = [0.0] * len(bounds)
    index = position = 0
    for span in histogram.positive_spans:
        index += span.offset
        if index < 0 or index + span.length > len(bounds) or position + span.length > len(given):
            return None
        counts[index : index + span.length] = given[position : position + span.length]
        index += span.length
        position += span.length
    if position != len(given):
        return None
    return [
        (format_bound(bound), float(total))
        for bound, total in zip(bounds, itertools.accumulate(counts), strict=True)
    ]


def is_stale(histogram: Any) -> bool:
    """Prometheus marks a histogram series stale with the stale NaN as its sum."""
    return bool(struct.pack("<d", histogram.sum) == _STALE)


def total(histogram: Any) -> float:
    """The histogram's count of observations: ``count_float`` of a float histogram, else
    ``count_int`` (a sender sets one of the two)."""
    return float(histogram.count_float or histogram.count_int)
