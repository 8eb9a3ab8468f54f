"""The bucket store: rings of buckets per resolution, for every series, in numpy.

The finest ring (:mod:`vhms.server.finest`) keeps its newest buckets plain
(:mod:`vhms.server.rings`: time-major chunks of 16,384 series, an empty bucket zero bits in
memory the kernel hands out on first write, each cell's sample time to the millisecond):
what a round's batch writes along a row, what leaves the newest sample in place when a
replay or an out-of-order sample comes, and what PromQL's lookback, ``rate`` extrapolation
and ``timestamp()`` read. Its buckets past the late-sample horizon (10 minutes) are sealed a
block at a time, values and sample times, with the codec of the coarse rings
(:mod:`vhms.server.sealed`, :mod:`vhms.server.codec`). Coarser rings aggregate the finest
ring's buckets (:mod:`vhms.resolutions`); their buckets that ingest can no longer recompute
are sealed the same way (:mod:`vhms.server.coarse`). See docs/vhms.md for the arithmetic.

Thread safety: one lock (``_lock``, reentrant) around ingest and the reading of buckets;
the service holds it from admission to application, so that its write-ahead log records
batches in the order they are applied. A selector chooses its series outside that lock
(the index guards itself), so a slow selection never holds up ingest.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from bookkeeper import SampleBatch
from bookkeeper.ground import LabelColumn, LabelColumns
from bookkeeper.wire import IngestColumns
from vhms.exceptions import FetchLimitError
from vhms.resolutions import Resolution, parse_resolutions
from vhms.results import NAME, CoarseSpan, FetchResult
from vhms.selector import Selector, parse_selector
from vhms.server.coarse import CoarseRing
from vhms.server.decoded import DecodedBlocks
from vhms.server.finest import DEFAULT_HORIZON_MS, FinestRing
from vhms.server.index import SeriesIndex
from vhms.server.rings import (
    CHUNK,
    EMPTY_BITS,
    ChunkPart,
    by_chunk,
    decode_values,
    encode_values,
)
from vhms.server.sample_reads import fill_samples
from vhms.server.selections import Selection, Selections
from vhms.server.stitch import Piece, RingSpan, stitch

__all__ = [
    "CHUNK",
    "DECODED_FLOOR",
    "DECODED_PER_SERIES",
    "Reading",
    "Store",
    "decode_values",
    "encode_values",
]

_NAN_AGGREGATES: dict[str, Callable[..., np.ndarray]] = {
    "min": np.nanmin,
    "max": np.nanmax,
    "sum": np.nansum,
    "mean": np.nanmean,
}
Ring = FinestRing | CoarseRing


DECODED_FLOOR = 32 << 20  # the cache of decoded blocks: at least this many bytes ...
DECODED_PER_SERIES = 128  # ... or this many a series held (a sixth of a series' rings, ~800 B)


class Store:
    """Multi-resolution buckets for up to ``max_series`` series (see the module doc).

    ``max_series_per_query`` and ``max_points_per_query`` bound what a fetch may return,
    ``max_select_s`` the time a selector may take to choose its series (its regexes tried
    against every value of a label); samples more than ``max_future_s`` ahead of this
    machine's clock are refused (a wild clock would otherwise push every ring forward and
    clear it). ``decoded_cache_bytes`` bounds the cache of decoded sealed blocks that
    fetches from the sealed blocks read through (:mod:`vhms.server.decoded`; 0: none; None:
    :data:`DECODED_FLOOR` or :data:`DECODED_PER_SERIES` bytes a series the store holds,
    whichever is more, so that a store keeps the same share of its blocks decoded at any size);
    ``finest_horizon_ms`` how far behind its head the finest ring keeps buckets plain
    (:mod:`vhms.server.finest`).
    """

    def __init__(
        self,
        resolutions: str | Sequence[Resolution] | None = None,
        *,
        max_series: int = 2_000_000,
        max_series_per_query: int = 200_000,
        max_points_per_query: int = 50_000_000,
        max_select_s: float = 5.0,
        max_future_s: float = 600.0,
        decoded_cache_bytes: int | None = None,
        finest_horizon_ms: int = DEFAULT_HORIZON_MS,
    ) -> None:
        if resolutions is None:
            parsed = parse_resolutions()
        elif isinstance(resolutions, str):
            parsed = parse_resolutions(resolutions)
        else:
            parsed = list(resolutions)
        self.resolutions = parsed
        self.index = SeriesIndex(max_series)
        self.stats: Counter[str] = Counter()
        self._decoded_grows = decoded_cache_bytes is None
        budget = DECODED_FLOOR if decoded_cache_bytes is None else decoded_cache_bytes
        self.decoded = DecodedBlocks(budget, self.stats)
        self.selections = Selections(self.stats)
        finest = FinestRing(parsed[0], self.decoded, finest_horizon_ms)
        self.rings: list[Ring] = [finest, *(CoarseRing(r, finest, self.decoded) for r in parsed[1:])]
        self.max_series_per_query = max_series_per_query
        self.max_points_per_query = max_points_per_query
        self.max_select_s = max_select_s
        self.max_future_ms = int(max_future_s * 1000)
        self.strings: dict[int, tuple[int, str]] = {}
        self._lock = threading.RLock()

    @property
    def series(self) -> int:
        return len(self.index)

    # -- ingest ------------------------------------------------------------------------------

    def ingest_batch(self, batch: SampleBatch, timestamp_ms: int | None = None) -> int:
        """Ingest a bookkeeper batch (booleans as 0/1, strings kept as the last value);
        ``timestamp_ms`` replaces every sample's time (an agent's round time). Returns the
        number of numeric samples stored."""
        return self.ingest_columns(batch.ingest_columns(timestamp_ms))

    def ingest_columns(self, columns: IngestColumns) -> int:
        """Ingest numeric and STRING samples by their batch's symbol table; returns the
        number of numeric samples stored."""
        numeric, strings = self.admit_columns(columns)
        if len(strings[0]):
            self.apply_strings(*strings)
        return self.apply(*numeric)

    def admit_columns(
        self, columns: IngestColumns
    ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, list[str], np.ndarray]]:
        """:meth:`admit` and :meth:`admit_strings` of a batch given by its symbol table (its
        series found in one pass: numeric, then STRING samples)."""
        numeric = len(columns.name_ids)
        ids = self.index.lookup_columns(
            columns.names,
            columns.label_sets,
            np.concatenate([columns.name_ids, columns.string_name_ids]),
            np.concatenate([columns.set_ids, columns.string_set_ids]),
        )
        return (
            self._admitted(ids[:numeric], columns.values, columns.timestamps),
            self._admitted_strings(ids[numeric:], columns.strings, columns.string_timestamps),
        )

    def ingest_strings(self, keys: list[str], strings: list[str], timestamps: np.ndarray) -> None:
        """Keep the latest value (by timestamp) of each STRING series."""
        self.apply_strings(*self.admit_strings(keys, strings, timestamps))

    def admit_strings(
        self, keys: list[str], strings: list[str], timestamps: np.ndarray
    ) -> tuple[np.ndarray, list[str], np.ndarray]:
        """The series ids, values and times of the STRING samples this store takes (series
        refused by ``max_series`` left out): what :meth:`apply_strings` stores."""
        return self._admitted_strings(self.index.lookup(keys), strings, timestamps)

    @staticmethod
    def _admitted_strings(
        ids: np.ndarray, strings: list[str], timestamps: np.ndarray
    ) -> tuple[np.ndarray, list[str], np.ndarray]:
        times = np.asarray(timestamps, dtype=np.int64)
        keep = ids >= 0
        if keep.all():
            return ids, list(strings), times
        return (
            ids[keep],
            [text for text, kept in zip(strings, keep.tolist(), strict=True) if kept],
            times[keep],
        )

    def apply_strings(self, ids: np.ndarray, strings: list[str], timestamps: np.ndarray) -> None:
        """Store admitted STRING samples: each series keeps its latest value."""
        with self._lock:
            for series_id, text, ts in zip(ids.tolist(), strings, timestamps.tolist(), strict=True):
                current = self.strings.get(series_id)
                if current is None or current[0] <= ts:
                    self.strings[series_id] = (int(ts), text)

    def ingest(self, keys: list[str], values: np.ndarray, timestamps: np.ndarray) -> int:
        """Ingest samples given as parallel columns: series keys (``name{k=v,...}``, canonical),
        float64 values, epoch-ms timestamps. Idempotent on (series, bucket). Returns the
        number of samples stored in at least one ring."""
        return self.apply(*self.admit(keys, values, timestamps))

    def admit(
        self, keys: list[str], values: np.ndarray, timestamps: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The series ids, values and times of the samples this store takes: series refused
        by ``max_series`` and samples more than ``max_future_s`` ahead of the clock are
        counted and left out. Split from :meth:`apply` so that what the service's
        write-ahead log records is exactly what the store applies, and a replay (days
        later, when no sample is from the future any more) takes the same samples."""
        return self._admitted(self.index.lookup(keys), values, timestamps)

    def _admitted(
        self, ids: np.ndarray, values: np.ndarray, timestamps: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        values = np.asarray(values, dtype=np.float64)
        timestamps = np.asarray(timestamps, dtype=np.int64)
        keep = ids >= 0
        refused = int(len(ids) - keep.sum())
        if refused:
            self.stats["series_refused"] += refused
        future = timestamps > int(time.time() * 1000) + self.max_future_ms
        if future.any():
            self.stats["samples_from_the_future"] += int(future.sum())
            keep &= ~future
        if not keep.all():
            ids, values, timestamps = ids[keep], values[keep], timestamps[keep]
        return ids, values, timestamps

    def apply(self, ids: np.ndarray, values: np.ndarray, timestamps: np.ndarray) -> int:
        """Store admitted samples (series ids, float64 values, epoch-ms times) in every ring
        that covers their time; returns how many were stored in at least one ring."""
        if not len(ids):
            return 0
        if len(timestamps) > 1 and (np.diff(timestamps) < 0).any():
            order = np.argsort(timestamps, kind="stable")
            ids, values, timestamps = ids[order], values[order], timestamps[order]
        with self._lock:
            for ring in self.rings:
                ring.grow(len(self.index))
            parts = by_chunk(ids)  # for the rows a batch of one bucket takes and puts, once
            stored = self._ingest_finest(ids, values, timestamps, parts)
            for ring in self.rings[1:]:
                stored |= self._ingest_coarse(ring, ids, values, timestamps, parts)
        count = int(stored.sum())
        self.stats["samples_stored"] += count
        self.stats["samples_too_old"] += int(len(ids) - count)
        return count

    def _ingest_finest(
        self, ids: np.ndarray, values: np.ndarray, timestamps: np.ndarray, parts: list[ChunkPart]
    ) -> np.ndarray:
        ring = self.rings[0]
        assert isinstance(ring, FinestRing)
        step = ring.step_ms
        newest = int(timestamps[-1]) // step  # apply() puts the samples in time order
        if int(timestamps[0]) // step == newest and not ring.is_sealed(np.array([newest])).all():
            return self._ingest_finest_bucket(newest, parts, values, timestamps)
        bucket = timestamps // step
        ring.advance(int(bucket.max()))
        ok = ring.covers(bucket)
        if ok.any():
            within = (timestamps[ok] - bucket[ok] * step).astype(ring.time_dtype)
            ring.put_samples(bucket[ok], ids[ok], encode_values(values[ok]), within)
        return ok

    def _ingest_finest_bucket(
        self, bucket: int, parts: list[ChunkPart], values: np.ndarray, timestamps: np.ndarray
    ) -> np.ndarray:
        """:meth:`_ingest_finest` of samples all in one bucket (a round's batch; ``parts``:
        their ids by chunk): along a row of each chunk, the bucket's slot."""
        finest = self.rings[0]
        assert isinstance(finest, FinestRing)
        finest.advance(bucket)
        if bucket <= finest.head - finest.slots:
            return np.zeros(len(values), dtype=bool)
        ring = finest.plain  # the bucket is open: its row is plain
        assert ring.times is not None  # the finest ring keeps its samples' times
        slot = bucket % ring.slots
        stored = encode_values(values)
        within: np.ndarray = (timestamps - bucket * ring.step_ms).astype(ring.time_dtype)
        for chunk, where, local in parts:
            times = ring.times[chunk][slot]
            mine, theirs = within[where], stored[where]
            newer = mine >= times[local]  # as in _ingest_finest: the later sample stays
            if not newer.all():
                columns = np.arange(local.start, local.stop) if isinstance(local, slice) else local
                local, mine, theirs = columns[newer], mine[newer], theirs[newer]
            if mine.any():  # offsets all 0 (a round at the minute): the cells hold 0 already
                times[local] = mine
            ring.values[chunk][slot][local] = theirs
            ring.written[chunk][slot] = True
        return np.ones(len(values), dtype=bool)

    def _ingest_coarse(
        self, ring: Ring, ids: np.ndarray, values: np.ndarray, timestamps: np.ndarray, parts: list[ChunkPart]
    ) -> np.ndarray:
        finest = self.rings[0]
        ratio = ring.step_ms // finest.step_ms
        newest = int(timestamps[-1])  # apply() puts the samples in time order
        fine = newest // finest.step_ms
        if ring.aggregate == "last" and fine == finest.head and int(timestamps[0]) // finest.step_ms == fine:
            # a round's batch, all in the newest finest bucket: the direct case below, by rows
            coarse = newest // ring.step_ms
            ring.advance(coarse)
            if coarse > ring.head - ring.slots:
                assert isinstance(finest, FinestRing)
                ring.put_row(coarse, parts, finest.plain.take_row(fine, parts, len(ids)))
                return np.ones(len(ids), dtype=bool)
        bucket = timestamps // ring.step_ms
        ring.advance(int(bucket.max()))
        ok = ring.covers(bucket)
        if not ok.any():
            return ok
        fine_bucket = timestamps // finest.step_ms
        in_fine = finest.covers(fine_bucket) & ok
        old = ok & ~in_fine
        direct = in_fine & (fine_bucket == finest.head) if ring.aggregate == "last" else np.zeros_like(ok)
        recompute = in_fine & ~direct
        if direct.any():
            # the newest finest bucket: nothing later can exist in this coarse bucket
            fine_values = finest.gather(fine_bucket[direct], ids[direct])
            ring.scatter(bucket[direct], ids[direct], fine_values)
        if recompute.any():
            self._recompute(ring, ratio, ids[recompute], bucket[recompute])
        if old.any():
            self._merge_old(ring, ids[old], values[old], bucket[old])
        return ok

    def _recompute(self, ring: Ring, ratio: int, ids: np.ndarray, bucket: np.ndarray) -> None:
        """Aggregate, for each (series, coarse bucket), the finest buckets inside it."""
        finest = self.rings[0]
        fine = bucket[:, None] * ratio + np.arange(ratio)[None, :]
        present = finest.covers(fine)
        cells = finest.gather(fine, ids[:, None])
        cells[~present] = np.nan
        aggregate = ring.aggregate
        with np.errstate(all="ignore"):
            if aggregate == "last":
                filled = cells.view(np.uint64) != EMPTY_BITS  # a stale marker is the last sample too
                last = ratio - 1 - np.argmax(filled[:, ::-1], axis=1)
                result = np.where(filled.any(axis=1), cells[np.arange(len(ids)), last], np.nan)
            elif aggregate == "count":
                result = (~np.isnan(cells)).sum(axis=1).astype(np.float64)
            else:
                cells[np.isnan(cells)] = np.nan  # a stale marker is a signalling NaN: fmax(1, it) is NaN
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows give NaN
                    function: Callable[..., np.ndarray] = _NAN_AGGREGATES[aggregate]
                    result = function(cells, axis=1)
                if aggregate == "sum":
                    result[np.isnan(cells).all(axis=1)] = np.nan
        ring.scatter(bucket, ids, result)

    def _merge_old(self, ring: Ring, ids: np.ndarray, values: np.ndarray, bucket: np.ndarray) -> None:
        """Samples older than the finest ring: merged where the merge is idempotent. The
        samples of one series and coarse bucket in the batch are reduced to one first (a
        fancy-indexed write would keep only one of them): the latest (the batch is in time
        order) for ``last``, the smallest or largest for ``min`` and ``max``."""
        aggregate = ring.aggregate
        if aggregate not in ("last", "min", "max"):
            self.stats[f"samples_dropped_by_{aggregate}"] += len(ids)
            return
        slots = bucket % ring.slots
        backwards = (ids * ring.slots + slots)[::-1]
        _, last_first, cell_of = np.unique(backwards, return_index=True, return_inverse=True)
        latest = len(ids) - 1 - last_first
        ids, bucket = ids[latest], bucket[latest]
        current = ring.gather(bucket, ids)
        if aggregate == "last":
            merged = np.where(current.view(np.uint64) == EMPTY_BITS, values[latest], current)
        else:
            quiet = np.where(np.isnan(values), np.nan, values)[::-1]  # a marker is a signalling NaN
            reduce = np.fmin if aggregate == "min" else np.fmax  # NaN: no sample
            reduced = np.full(len(ids), np.nan)
            reduce.at(reduced, cell_of, quiet)
            merged = reduce(current, reduced)
        ring.scatter(bucket, ids, merged)

    # -- queries -----------------------------------------------------------------------------

    def select(self, selector: str | Selector) -> np.ndarray:
        """Ids of the series a selector picks (``FetchLimitError`` past ``max_series_per_query``,
        or when choosing them takes longer than ``max_select_s``)."""
        parsed = parse_selector(selector) if isinstance(selector, str) else selector
        deadline = time.monotonic() + self.max_select_s

        def check() -> None:
            if time.monotonic() > deadline:
                self.stats["selects_too_slow"] += 1
                raise FetchLimitError(
                    f"{parsed.text or '{}'} took longer than max_select_s={self.max_select_s:g} s to choose "
                    "its series: match fewer label values, or a simpler regex"
                )

        ids = self.index.match(parsed, check)
        if len(ids) > self.max_series_per_query:
            raise FetchLimitError(
                f"{parsed.text or '{}'} selects {len(ids)} series, more than max_series_per_query="
                f"{self.max_series_per_query}: narrow the selector"
            )
        return ids

    def _selection(self, selector: str | Selector) -> tuple[np.ndarray, LabelColumns, bool]:
        """The ids a selector picks and their label columns as a fetch answers them (shared:
        read, never change), remembered while the index holds the same series
        (:mod:`vhms.server.selections`), and whether they are (a fetch of the same selector
        then answers the same label columns object)."""
        generation = self.index.generation()
        found = self.selections.get(selector, generation)
        remembered = found is not None
        if found is None:
            ids = self.select(selector)
            labels = {label: column.compact() for label, column in self.index.columns(ids).items()}
            if NAME not in labels:
                labels[NAME] = LabelColumn.absent(0)
            for column in labels.values():  # shared by the fetches that follow: a change would raise
                column.codes.flags.writeable = False
            found = Selection(generation, ids, labels)
            remembered = self.selections.keep(selector, found)
        return found.ids, found.labels, remembered

    def pick_resolution(self, start_ms: int) -> Ring:
        """The finest ring that holds the first bucket a fetch from ``start_ms`` returns (the
        first whose start is at or after it), else the coarsest: ``last=1h`` reads the 60
        one-minute buckets of a 60 x 1 min ring, not 5-minute ones."""
        for ring in self.rings:
            first = -(-start_ms // ring.step_ms)
            if ring.head >= 0 and ring.head - ring.slots + 1 <= first:
                return ring
        return self.rings[-1]

    def fetch(
        self,
        selector: str | Selector,
        start_ms: int,
        end_ms: int,
        resolution: str | int = "auto",
        *,
        sample_times: bool = False,
    ) -> FetchResult:
        """Buckets of the selected series whose start lies in ``[start_ms, end_ms)``, at the
        given resolution (its step in seconds) or the finest that covers the range. With
        ``sample_times``, samples rather than buckets: the buckets that may hold a sample
        whose own time lies in ``[start_ms, end_ms)`` (from the one holding ``start_ms``),
        from the finest ring each value's own time; ``auto`` then reads the finest ring where
        it reaches and coarser rings only before it (:mod:`vhms.server.stitch`; the answer's
        ``coarse_spans`` say where, its step is the finest ring's)."""
        reading = self.reading(selector, start_ms, end_ms, resolution, sample_times=sample_times)
        return reading.read(slice(None))

    def reading(
        self,
        selector: str | Selector,
        start_ms: int,
        end_ms: int,
        resolution: str | int = "auto",
        *,
        sample_times: bool = False,
    ) -> Reading:
        """:meth:`fetch`'s series and buckets chosen (and its limits checked) without reading
        a value: :meth:`Reading.read` then reads any of those series, a block at a time."""
        if end_ms <= start_ms:
            raise ValueError(f"fetch needs start < end, got {start_ms} >= {end_ms}")
        ids, labels, remembered = self._selection(selector)
        stitched = sample_times and resolution == "auto"
        if self._decoded_grows:  # the index only grows: so does the budget
            self.decoded.budget = max(DECODED_FLOOR, DECODED_PER_SERIES * len(self.index))
        with self._lock:
            # a series the index created after ingest last grew the rings has no column yet
            for each in self.rings:
                each.grow(int(ids[-1]) + 1 if len(ids) else 0)
            if stitched:
                spans = [RingSpan(r.step_ms, r.head - r.slots + 1, r.head) for r in self.rings]
                pieces = stitch(spans, start_ms, end_ms)
            else:
                ring = self._ring(resolution, start_ms)
                first = start_ms // ring.step_ms if sample_times else -(-start_ms // ring.step_ms)
                pieces = [Piece(self.rings.index(ring), first, (end_ms - 1) // ring.step_ms)]
        # checked before the time axis exists: a range of centuries must not allocate it,
        # even for no series at all
        count = sum(piece.last - piece.first + 1 for piece in pieces)
        points = max(len(ids), 1) * count
        if points > self.max_points_per_query:
            raise FetchLimitError(
                f"{len(ids)} series x {count} buckets = {points} points, more than "
                f"max_points_per_query={self.max_points_per_query}: narrow the selector or the range"
            )
        timed = stitched or (sample_times and pieces[0].ring == 0)
        coarse = tuple(
            CoarseSpan(
                self.rings[p.ring].step_ms,
                p.first * self.rings[p.ring].step_ms,
                (p.last + 1) * self.rings[p.ring].step_ms,
            )
            for p in pieces
            if stitched and p.ring
        )
        step = self.rings[0 if stitched else pieces[0].ring].step_ms
        return Reading(self, ids, labels, pieces, timed, step, coarse, remembered)

    def _read(
        self, pieces: list[Piece], ids: np.ndarray, timed: bool, spare: _Spare | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The bucket times, values ``[series, buckets]`` and (``timed``) sample times of
        ``pieces`` side by side (a coarser ring's sample at its bucket's start), each piece
        decoded straight into its rows of one time-major array in one pass: the answers are
        transposed views, as cheap to reduce across series as a copy would be to make. Where
        no sample of the read has a time of its own (every one at its bucket's start, as the
        agents' rounds are), the sample times are the bucket starts broadcast (no memory);
        the offsets are copied like the values (only the ids' columns: a chunk's whole rows,
        a few of them asked, would be megabytes) and looked at once. The arrays are
        ``spare``'s when given (the answer is then good until its next read)."""
        spare = spare if spare is not None else _Spare()
        total = sum(piece.last - piece.first + 1 for piece in pieces)
        raw = spare.take("values", (total, len(ids)), np.uint64)
        finest = self.rings[0]
        assert isinstance(finest, FinestRing)
        # 0: at the bucket's start
        offsets = spare.take("offsets", (total, len(ids)), finest.time_dtype, zeroed=True) if timed else None
        row = 0
        starts = []
        for piece in pieces:
            count = piece.last - piece.first + 1
            rows = slice(row, row + count)
            ring = self.rings[piece.ring]
            step = ring.step_ms
            starts.append(np.arange(piece.first * step, (piece.last + 1) * step, step, dtype=np.int64))
            if offsets is not None and piece.ring == 0 and len(ids):  # values and times in one pass
                fill_samples(finest, ids, (piece.first, count), (raw[rows], offsets[rows]))
            else:
                ring.fill(
                    ids, np.arange(piece.first, piece.last + 1, dtype=np.int64), raw[rows], decoded=True
                )
            row = rows.stop
        stamps = starts[0] if len(starts) == 1 else np.concatenate(starts)
        values = raw.view(np.float64).T
        if offsets is None:
            return stamps, values, None
        if not np.count_nonzero(offsets):  # a C count, cheaper than any() on a small read
            return stamps, values, np.broadcast_to(stamps[None, :], values.shape)
        times = spare.take("times", (total, len(ids)), np.int64)
        np.add(stamps[:, None], offsets, out=times)
        return stamps, values, times.T

    def _ring(self, resolution: str | int, start_ms: int) -> Ring:
        if resolution == "auto":
            return self.pick_resolution(start_ms)
        for ring in self.rings:
            if ring.resolution.step_s == int(resolution):
                return ring
        steps = ", ".join(str(r.step_s) for r in self.resolutions)
        raise ValueError(f"no resolution of {resolution} s (this store has {steps}, or auto)")

    def last_strings(self, selector: str | Selector) -> dict[str, tuple[int, str]]:
        """The last value and its time of each selected STRING series."""
        ids = self.select(selector)
        with self._lock:
            held = [i for i in ids.tolist() if i in self.strings]
            return dict(zip(self.index.keys_of(held), [self.strings[i] for i in held], strict=True))

    def series_keys(self, selector: str | Selector) -> list[str]:
        """The canonical keys of the selected series."""
        ids = self.select(selector)
        return self.index.keys_of(ids)

    def label_names(self) -> list[str]:
        return self.index.label_names()

    def label_values(self, label: str) -> list[str]:
        return self.index.label_values(label)


class Reading:
    """A fetch's series (``labels``, the selection's, in its order) and buckets, chosen once
    (:meth:`Store.reading`), read a block of series at a time: each block's arrays are
    that block's only, so a query that reduces over series or writes per series never
    holds every series' samples at once (what glibc would put in a mapping of its own,
    handed back to the kernel when freed and faulted in again by the next query). Each
    :meth:`read` takes the store's lock on its own: ingest goes on between blocks, and a
    later block reads the buckets as they are then (the index only grows, so the series'
    places do not change). ``remembered``: the store keeps the selection, so a reading of
    the same selector answers the same ``labels`` object while no series is new (what a
    reader may key what it derives from them by)."""

    def __init__(
        self,
        store: Store,
        ids: np.ndarray,
        labels: LabelColumns,
        pieces: list[Piece],
        timed: bool,
        step_ms: int,
        coarse: tuple[CoarseSpan, ...],
        remembered: bool = False,
    ) -> None:
        self.labels = labels
        self.remembered = remembered
        self.buckets = sum(piece.last - piece.first + 1 for piece in pieces)
        self.step_ms = step_ms
        self.coarse_spans = coarse
        self._store = store
        self._ids = ids
        self._pieces = pieces
        self._timed = timed
        self._spare = _Spare()

    def __len__(self) -> int:
        return len(self._ids)

    def read(self, series: slice | np.ndarray, *, reuse: bool = False) -> FetchResult:
        """The samples of the series at ``series`` (a slice, or ascending places) as a
        fetch answers them; the answer's ``labels`` are every series' (the reading's). With
        ``reuse``, in the arrays of the previous read with ``reuse`` (which then holds this
        read's samples: a reader done with each block before the next touches no fresh
        memory after the first)."""
        store = self._store
        with store._lock:
            spare = self._spare if reuse else None
            timestamps, values, times = store._read(self._pieces, self._ids[series], self._timed, spare)
        return FetchResult(self.labels, timestamps, values, self.step_ms, times, self.coarse_spans)


class _Spare:
    """Arrays that one read after another writes into (:meth:`Reading.read` with ``reuse``),
    by name: each kept as flat memory, grown when a read needs more, a view of the shape
    asked handed out."""

    def __init__(self) -> None:
        self._flat: dict[str, np.ndarray] = {}

    def take(self, name: str, shape: tuple[int, int], dtype: type, zeroed: bool = False) -> np.ndarray:
        """An array of ``shape``, of zeros with ``zeroed`` (fresh ones: zeroed by the kernel)."""
        size = shape[0] * shape[1]
        flat = self._flat.get(name)
        if flat is None or flat.dtype != dtype or len(flat) < size:
            flat = self._flat[name] = (np.zeros if zeroed else np.empty)(size, dtype=dtype)
        elif zeroed:
            flat[:size] = 0
        return flat[:size].reshape(shape)
