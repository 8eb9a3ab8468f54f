"""From a PromQL selector to the series and samples a fetch reads.

PromQL's matchers become a VHMS selector that picks a superset of the series (what the
store's index can answer: ``=`` and ``!=`` on a value, RE2 regexes that cannot match the
empty string), and every matcher is then applied exactly, with PromQL's rule that a
missing label is the empty string, on the label columns of the answer.

Samples: each bucket with a value is one sample (the deployment sets the finest ring's step
to the scrape or poll interval). VHMS's clients (:class:`vhms.LocalClient` in process, the
shards' Thrift fetch through :class:`vhms.ShardedClient`) answer a sample read
(``fetch(..., sample_times=True)``): the finest ring where it reaches, each sample at its own
time, and coarser rings only before it (``FetchResult.coarse_spans``), a sample there at its
bucket's start, as from another source: docs/promql.md says where this differs from
Prometheus.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from bookkeeper.ground import LabelColumns
from query_dsl.promql.ast import LabelMatcher, VectorSelector
from query_dsl.series_table import SeriesTable
from query_dsl.sources import DataSource
from vhms import CoarseSpan, FetchResult, LocalClient, Matcher, ShardedClient, VhmsClient, parse_selector

__all__ = [
    "STALE_BITS",
    "Samples",
    "coarse_warning",
    "fetch_blocks",
    "fetch_samples",
    "matches_empty",
    "reads_sample_times",
    "vhms_selector",
]

STALE_BITS = 0x7FF0_0000_0000_0002
"""Prometheus's stale marker (``value.StaleNaN``): the series ends at this sample."""

_VHMS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]*\Z")
_VHMS_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
_OPS = {"=": "=", "!=": "!=", "=~": "~", "!~": "!~"}
_VHMS_READERS = (LocalClient, ShardedClient, VhmsClient)  # their fetch answers sample_times


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@lru_cache(maxsize=256)  # compiled once for the queries that repeat it (a dashboard's)
def _vhms_matcher(matcher: LabelMatcher) -> Matcher:
    """The store's matcher for one PromQL matcher (its RE2 regex compiled with the store's
    limits): what the exact filter applies."""
    label = "l" if not _VHMS_LABEL.match(matcher.label) else matcher.label
    return parse_selector("{" + f"{label}{_OPS[matcher.op]}{_quoted(matcher.value or 'x')}" + "}").matchers[0]


@lru_cache(maxsize=4096)  # a regex matched per query and matcher was most of a small selection's time
def matches_empty(matcher: LabelMatcher) -> bool:
    """Whether the matcher keeps a series that lacks its label (the empty string)."""
    if matcher.op in ("=", "!="):
        return (matcher.value == "") == (matcher.op == "=")
    if matcher.value == "":
        return matcher.op == "=~"
    hit = bool(_vhms_matcher(matcher).matching([""])[0])
    return hit == (matcher.op == "=~")


def vhms_selector(selector: VectorSelector) -> str:
    """A VHMS selector picking at least the series ``selector`` picks."""
    return _vhms_text(selector.matchers)


@lru_cache(maxsize=4096)  # made once for the queries that repeat it
def _vhms_text(matchers: tuple[LabelMatcher, ...]) -> str:
    head = ""
    parts: list[str] = []
    for matcher in matchers:
        if matcher.label == "__name__":
            if matcher.op == "=" and _VHMS_NAME.match(matcher.value) and not head:
                head = matcher.value
            continue
        if not _VHMS_LABEL.match(matcher.label):
            continue
        if matcher.op == "!=" and matcher.value == "":
            parts.append(f"{matcher.label}~{_quoted('.+')}")
        elif (
            matcher.op == "!~"
            or (matcher.op != "=~" and matcher.value)
            or (matcher.op == "=~" and not matches_empty(matcher))
        ):
            if matcher.op == "=" and not matcher.value:
                continue
            parts.append(f"{matcher.label}{_OPS[matcher.op]}{_quoted(matcher.value)}")
    return head + ("{" + ",".join(parts) + "}" if parts else "")


def _keep(result: FetchResult, matchers: tuple[LabelMatcher, ...]) -> np.ndarray:
    """Which series of ``result`` every matcher keeps (a missing label is "")."""
    keep = np.ones(len(result), dtype=bool)
    for matcher in matchers:
        column = result.labels.get(matcher.label)
        empty = matches_empty(matcher)
        if column is None:
            if not empty:
                keep[:] = False
            continue
        values, codes = column
        if matcher.op in ("=", "!="):
            hits = np.fromiter((v == matcher.value for v in values), dtype=bool, count=len(values))
            if matcher.op == "!=":
                hits = ~hits
        else:
            hits = _vhms_matcher(matcher).matching(values)
        lookup = np.append(hits, empty)  # code -1 reads the trailing "missing" answer
        keep &= lookup[codes]
    return keep


@dataclass
class Samples:
    """Series (``table``) and their samples: a shared time axis (``times``, epoch ms,
    ascending) and ``values`` ``[series, times]``, NaN where a series has no sample.
    ``step_ms`` is the spacing of the time axis (a ring's step, or a subquery's);
    ``exact``, when known, each sample's own time ``[series, times]`` within its bucket
    ``[time, time + step_ms)``. ``stale``, when a series has one, where its stale markers
    are (their values NaN: a range reads no sample there; an instant selector's lookback
    ends there). ``coarse``: the spans VHMS read from rings coarser than the finest (the
    time axis is then not evenly spaced there). ``full``: every cell holds a sample and
    none is NaN (what a fetch of series scraped throughout its span reads: nothing to
    look for). ``gaps``, when known: the columns where a cell is NaN (none elsewhere), so
    that what looks for NaN (stale markers, NaN samples, the first bucket from which every
    series has a sample) reads only them, not every cell."""

    table: SeriesTable
    times: np.ndarray
    values: np.ndarray
    step_ms: int
    exact: np.ndarray | None = None
    stale: np.ndarray | None = None
    coarse: tuple[CoarseSpan, ...] = ()
    full: bool = False
    gaps: np.ndarray | None = None

    def sample_times(self) -> np.ndarray:
        """Each sample's time, ``[series, times]``: its own, else its bucket's start."""
        if self.exact is not None:
            return self.exact
        return np.broadcast_to(self.times[None, :], self.values.shape)


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def coarse_warning(span: CoarseSpan, finest_ms: int) -> str:
    """What an answer says of samples read from a coarser ring (``span``)."""
    return (
        f"read VHMS's {span.step_ms // 1000} s ring from {_utc(span.start_ms)} to {_utc(span.end_ms)}: "
        f"the finest ({finest_ms // 1000} s) keeps nothing older; there a sample is its bucket's "
        f"aggregate, at the bucket's start"
    )


def reads_sample_times(source: DataSource) -> bool:
    """Whether ``source`` is a VHMS client, which answers each sample's own time."""
    return isinstance(source, _VHMS_READERS)


def fetch_samples(
    source: DataSource, selector: VectorSelector, low_ms: int, high_ms: int, *, trim: bool = True
) -> Samples:
    """The samples of the series ``selector`` picks, with times in ``[low_ms, high_ms]``;
    without ``trim``, the edge buckets' samples whose own times lie outside are kept (an
    instant selector's lookback and its "not after the time" rule leave them out anyway)."""
    low_ms = max(low_ms, 0)
    high_ms = max(high_ms, low_ms)
    text = vhms_selector(selector)
    result: FetchResult
    if isinstance(source, _VHMS_READERS):
        result = source.fetch(text, low_ms, high_ms + 1, sample_times=True)
    else:
        result = source.fetch(text, low_ms, high_ms + 1)
    table, rows = _picked(result, selector.matchers)
    return _samples(result, table, rows, (low_ms, high_ms), trim)


def fetch_blocks(
    source: DataSource, selector: VectorSelector, low_ms: int, high_ms: int, cells: int, *, trim: bool = True
) -> tuple[SeriesTable, int, Iterator[tuple[int, Samples]]] | None:
    """:func:`fetch_samples` a block of series at a time (about ``cells`` series x buckets),
    from a store of this process (None for another source: its fetch answers every series
    at once): the series' table, the number of buckets, and each block's first series and
    samples (their ``table`` is every series'), read when asked for, into the arrays of the
    block before (a reader is done with a block when it asks for the next). No block's
    arrays grow with the series, so a reader that reduces each block before the next holds
    a few tens of MB whatever the selection, and touches memory the kernel hands out only for
    the first block."""
    if not isinstance(source, LocalClient):
        return None
    low_ms = max(low_ms, 0)
    high_ms = max(high_ms, low_ms)
    reading = source.reading(vhms_selector(selector), low_ms, high_ms + 1, sample_times=True)
    found = PICKED.get(selector.matchers, reading.labels)  # no columns to make then
    if found is not None:
        table, rows = found.table, found.rows
    else:
        chosen = FetchResult(reading.labels, np.zeros(0, dtype=np.int64), np.zeros((len(reading), 0)), 0)
        table, rows = _picked(chosen, selector.matchers, reading.remembered)
    block = max(1, cells // max(reading.buckets, 1))

    def blocks() -> Iterator[tuple[int, Samples]]:
        for start in range(0, len(table), block):
            places = slice(start, start + block) if rows is None else rows[start : start + block]
            yield start, _samples(reading.read(places, reuse=True), table, None, (low_ms, high_ms), trim)

    return table, reading.buckets, blocks()


def _samples(
    result: FetchResult, table: SeriesTable, rows: np.ndarray | None, span: tuple[int, int], trim: bool
) -> Samples:
    """The samples of ``result``'s series at ``rows`` (None: all), their own times outside
    ``span`` left out with ``trim``, stale markers found."""
    times = np.asarray(result.timestamps, dtype=np.int64)
    values = np.asarray(result.values, dtype=np.float64)
    exact = result.sample_times
    if rows is not None:
        values = values[rows]
        exact = None if exact is None else exact[rows]
    if exact is not None and trim:  # samples outside [low, high] by their own time are not read
        values = _inside(values, exact, times, span, result.step_ms)
    nan = np.isnan(values)
    if not nan.any():
        return Samples(table, times, values, result.step_ms, exact, None, result.coarse_spans, full=True)
    gaps = np.flatnonzero(nan.any(axis=0))
    stale = _stale_markers(values, nan, gaps)
    if stale is not None:
        values = np.where(stale, np.nan, values)
    return Samples(table, times, values, result.step_ms, exact, stale, result.coarse_spans, gaps=gaps)


class _Picked(NamedTuple):
    labels: LabelColumns  # the fetch's columns this was derived from (held: its identity is the key)
    table: SeriesTable
    rows: np.ndarray | None


class PickedTables:
    """The tables of the series selectors picked, by their matchers, each with the label
    columns it was derived from (see :func:`fetch_samples`): at most ``max_entries`` of
    them and ``max_series`` series in all, the least recently used out first. A table of
    more than an eighth of that (65,536 series) is kept only when the store remembers its
    selection (its label columns then come back while no series is new: else the table
    would never be found again), up to a quarter: a store of a million series answers its
    hundred thousand gauges from a kept table as one of a hundred thousand answers its ten
    thousand (:mod:`vhms.server.selections` bounds what a store remembers by its size)."""

    def __init__(self, max_entries: int = 512, max_series: int = 1 << 19) -> None:
        self.max_entries = max_entries
        self.max_series = max_series
        self.series = 0
        self._entries: OrderedDict[tuple[LabelMatcher, ...], _Picked] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, matchers: tuple[LabelMatcher, ...], labels: LabelColumns) -> _Picked | None:
        """The table kept for ``matchers`` if it was derived from ``labels`` (the same object)."""
        with self._lock:
            found = self._entries.get(matchers)
            if found is None or found.labels is not labels:
                return None
            self._entries.move_to_end(matchers)
            return found

    def keep(self, matchers: tuple[LabelMatcher, ...], picked: _Picked, remembered: bool = False) -> None:
        """Keep ``picked`` for ``matchers`` within the bounds (``remembered``: the store
        remembers the selection its label columns came from)."""
        size = len(picked.table)
        if size > self.max_series // (4 if remembered else 8):
            return
        with self._lock:
            previous = self._entries.pop(matchers, None)
            self.series += size - (0 if previous is None else len(previous.table))
            self._entries[matchers] = picked
            while len(self._entries) > self.max_entries or self.series > self.max_series:
                self.series -= len(self._entries.popitem(last=False)[1].table)


PICKED = PickedTables()


def _picked(
    result: FetchResult, matchers: tuple[LabelMatcher, ...], remembered: bool = False
) -> tuple[SeriesTable, np.ndarray | None]:
    """The series of ``result`` that ``matchers`` keep: their table and their rows (None: all).
    Remembered per matchers while a fetch answers the same label columns object (a store of
    this process answers the one it remembered for the selector while no series is new:
    :class:`vhms.LocalClient`; ``remembered``: it does for this one), so a dashboard's
    selector asked again reuses its table and what was derived from it (its answer's label
    texts, its order, its classes): :data:`PICKED`."""
    found = PICKED.get(matchers, result.labels)
    if found is not None:
        return found.table, found.rows
    keep = _keep(result, matchers)
    table = SeriesTable.from_fetch(result)
    rows = None
    if not keep.all():
        rows = np.flatnonzero(keep)
        table = table.take(rows)
    PICKED.keep(matchers, _Picked(result.labels, table, rows), remembered)
    return table, rows


def _inside(
    values: np.ndarray, exact: np.ndarray, times: np.ndarray, span: tuple[int, int], step_ms: int
) -> np.ndarray:
    """``values`` (the fetch's own) with NaN where a sample's own time lies outside ``span``
    (both ends in). A sample lies in ``[bucket, bucket + step)``, so only the buckets that
    start before the span or within a step of its end can hold one: only their columns are
    read, not every sample's time."""
    low_ms, high_ms = span
    head = int(np.searchsorted(times, low_ms, side="left"))
    tail = max(int(np.searchsorted(times, high_ms - step_ms, side="right")), head)
    edges = np.r_[0:head, tail : len(times)]
    if not len(edges):
        return values
    if not values.flags.writeable:
        values = values.copy(order="K")
    own = exact[:, edges]
    values[:, edges] = np.where((own >= low_ms) & (own <= high_ms), values[:, edges], np.nan)
    return values


def _stale_markers(values: np.ndarray, nan: np.ndarray, gaps: np.ndarray) -> np.ndarray | None:
    """Where ``values`` (NaN where ``nan``, in the columns ``gaps`` only) hold Prometheus's
    stale marker (its bits, a NaN), or None if nowhere."""
    if len(gaps) == values.shape[1]:
        stale: np.ndarray = nan & (values.view(np.uint64) == np.uint64(STALE_BITS))
        return stale if stale.any() else None
    found = nan[:, gaps] & (values[:, gaps].view(np.uint64) == np.uint64(STALE_BITS))
    if not found.any():
        return None
    stale = np.zeros(values.shape, dtype=bool)
    stale[:, gaps] = found
    return stale
