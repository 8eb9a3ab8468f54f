"""Landing records (one per sample batch) to sample rows, in Arrow (``mapInArrow``), sorted
by series and time.

The per-sample columns of a landing record are little-endian binary vectors; the records of
an Arrow batch lie one after the other in each column's data buffer, so each sample column
of a run of records is one numpy view: there is no per-sample Python work on the way from
Avro to Parquet but for the series keys, which come from a cache (``series.ShapeCache``)
as one Arrow string array per record shape. A record's ``keep`` mask (from ``dedupe``)
drops the samples already written.

Each output batch is sorted by (series, time): a series' successive samples sit side by
side in the Parquet file, where the encodings of the columns make them nearly free.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bookkeeper import VarType
from bookkeeper.wire import series_keys
from spark_jobs.series import ShapeCache

__all__ = ["OUTPUT_SCHEMA", "explode_batches"]

OUTPUT_SCHEMA = pa.schema(
    [
        pa.field("series", pa.string(), False),
        pa.field("type", pa.int8(), False),
        pa.field("value", pa.float64()),
        pa.field("string_value", pa.string()),
        pa.field("ts", pa.timestamp("us", tz="UTC"), False),
        pa.field("sample_ts_ms", pa.int64(), False),
        pa.field("context", pa.string(), False),
        pa.field("date", pa.string(), False),
        pa.field("hour", pa.string(), False),
    ]
)
ROWS_PER_BATCH = 1 << 18  # samples per output batch: bounded memory, long sorted runs
KEY_CACHE_BYTES = 256 << 20  # per Python worker: every endpoint's keys at 1.5M series a minute
_HOUR_MS = 3_600_000
_keys: ShapeCache[pa.StringArray] = ShapeCache(KEY_CACHE_BYTES, lambda keys: keys.nbytes)


class _Bytes:
    """The per-record byte strings of a binary column (or the strings of a list column's
    child) as one numpy buffer and offsets: record ``i`` is ``data[offsets[i]:offsets[i+1]]``."""

    def __init__(self, column: pa.Array) -> None:
        _, offsets, data = column.buffers()[:3]
        self.offsets = np.frombuffer(offsets, dtype=np.int32)[column.offset : column.offset + len(column) + 1]
        self.data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)

    def span(self, first: int, last: int) -> bytes:
        """The bytes of records ``first`` to ``last`` inclusive."""
        return self.data[self.offsets[first] : self.offsets[last + 1]].tobytes()

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


class _StringLists:
    """A ``list<string>`` column (or a map column's keys or items): each record's strings,
    as Python objects only when asked."""

    def __init__(self, column: pa.Array, child: pa.Array) -> None:
        self.lists = np.asarray(column.offsets)
        self.child = child
        self.strings = _Bytes(child)

    def fingerprint(self, record: int) -> bytes:
        """The record's strings as bytes that differ when the strings differ."""
        first, end = self.lists[record], self.lists[record + 1]
        if end == first:
            return b"|"
        lengths = np.diff(self.strings.offsets[first : end + 1])
        return lengths.tobytes() + self.strings.span(first, end - 1) + b"|"

    def python(self, record: int) -> list[str]:
        first, end = self.lists[record], self.lists[record + 1]
        strings: list[str] = self.child.slice(first, end - first).to_pylist()
        return strings


class _Landing:
    """One Arrow batch of landing records, its sample columns as numpy views."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        column = batch.column
        self.batch = batch
        self.rounds = column("round_ms")
        self.contexts = column("context")
        self.names = _StringLists(column("names"), column("names").values)
        self.label_sets = _StringLists(column("label_sets"), column("label_sets").values)
        self.common = _StringLists(column("common_labels"), column("common_labels").keys)
        self.common_items = _StringLists(column("common_labels"), column("common_labels").items)
        self.strings = _StringLists(column("strings"), column("strings").values)
        self.name_ids = _Bytes(column("name_ids"))
        self.set_ids = _Bytes(column("label_set_ids"))
        self.types = _Bytes(column("types"))
        self.values = _Bytes(column("values"))
        self.stamps = _Bytes(column("timestamps"))
        self.keep = _Bytes(column("keep"))
        self.masked = np.asarray(column("keep").is_valid())  # null: every sample kept
        self.counts = self.types.lengths()
        for vector, width in ((self.name_ids, 4), (self.set_ids, 4), (self.values, 8), (self.stamps, 8)):
            wrong = np.flatnonzero(vector.lengths() != self.counts * width)
            if len(wrong):
                raise ValueError(f"{self._where(int(wrong[0]))}: its vectors differ in length")
        wrong = np.flatnonzero(self.masked & (self.keep.lengths() != self.counts))
        if len(wrong):
            raise ValueError(f"{self._where(int(wrong[0]))}: its keep mask is not one byte a sample")

    def _where(self, record: int) -> str:
        return (
            f"landing record of {self.contexts[record]} at {self.rounds[record]} "
            f"from {self.batch.column('endpoint')[record]}"
        )

    def _build_series(self, record: int) -> pa.StringArray:
        common = dict(zip(self.common.python(record), self.common_items.python(record), strict=True))
        try:
            keys = series_keys(
                common,
                self.names.python(record),
                self.label_sets.python(record),
                np.frombuffer(self.name_ids.span(record, record), dtype="<i4"),
                np.frombuffer(self.set_ids.span(record, record), dtype="<i4"),
            )
        except ValueError as exc:
            raise ValueError(f"{self._where(record)}: {exc}") from None
        return pa.array(keys, pa.string())

    def series(self, record: int) -> pa.StringArray:
        """The record's series keys, one per sample."""
        parts = (self.common, self.common_items, self.names, self.label_sets)
        shape = hashlib.blake2b(b"".join(part.fingerprint(record) for part in parts), digest_size=16)
        shape.update(self.name_ids.span(record, record))
        shape.update(self.set_ids.span(record, record))
        return _keys.get(shape.digest(), lambda: self._build_series(record))

    def _kept(self, first: int, last: int) -> np.ndarray:
        """The samples of records ``first`` to ``last`` the dedupe kept."""
        masked = np.repeat(self.masked[first : last + 1], self.counts[first : last + 1])
        keep = np.ones(len(masked), dtype=bool)
        keep[masked] = np.frombuffer(self.keep.span(first, last), dtype=np.uint8).astype(bool)
        return keep

    def rows(self, first: int, last: int) -> pa.RecordBatch:
        """The kept samples of records ``first`` to ``last`` inclusive, sorted."""
        counts = self.counts[first : last + 1]
        owner = np.repeat(np.arange(first, last + 1), counts)
        types = np.frombuffer(self.types.span(first, last), dtype=np.uint8)
        raw = np.frombuffer(self.values.span(first, last), dtype="<i8")
        stamps = np.frombuffer(self.stamps.span(first, last), dtype="<i8")
        values = raw.astype(np.float64)
        doubles = types == VarType.DOUBLE
        values[doubles] = raw.view(np.float64)[doubles]
        is_string = types == VarType.STRING
        string_values = pa.nulls(len(types), pa.string())
        if is_string.any():
            position = self.strings.lists[owner] + raw
            inside = (raw >= 0) & (position < self.strings.lists[owner + 1])
            if not inside[is_string].all():
                bad = int(owner[is_string & ~inside][0])
                raise ValueError(f"{self._where(bad)}: a string index out of its strings")
            string_values = pc.take(
                self.strings.child, pa.array(np.where(is_string, position, 0), mask=~is_string)
            )
        rounds = self.rounds.slice(first, last - first + 1)
        has_round = np.repeat(np.asarray(rounds.is_valid()), counts)
        when = np.where(has_round, np.repeat(np.asarray(rounds.fill_null(0)), counts), stamps)
        hours, hour_of_row = np.unique(when // _HOUR_MS, return_inverse=True)
        days = pa.array(np.datetime_as_string((hours * _HOUR_MS).astype("datetime64[ms]"), unit="D").tolist())
        hour_texts = pa.array([f"{hour % 24:02d}" for hour in hours.tolist()])
        row_hours = pa.array(hour_of_row)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.concat_arrays([self.series(record) for record in range(first, last + 1)]),
                pa.array(types.astype(np.int8)),
                pa.array(values, mask=is_string),
                string_values,
                pa.array(when * 1000, pa.timestamp("us", tz="UTC")),
                pa.array(stamps),
                pc.take(self.contexts, pa.array(owner)),
                pc.take(days, row_hours),
                pc.take(hour_texts, row_hours),
            ],
            schema=OUTPUT_SCHEMA,
        )
        if self.masked[first : last + 1].any():
            batch = batch.filter(pa.array(self._kept(first, last)))
        return batch.take(pc.sort_indices(batch, sort_keys=[("series", "ascending"), ("ts", "ascending")]))

    def chunks(self) -> Iterator[tuple[int, int]]:
        """Runs of whole records of about ``ROWS_PER_BATCH`` samples."""
        first, size = 0, 0
        for record, count in enumerate(self.counts.tolist()):
            size += count
            if size >= ROWS_PER_BATCH:
                yield first, record
                first, size = record + 1, 0
        if first < len(self.counts):
            yield first, len(self.counts) - 1


def explode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """For ``mapInArrow``: each landing record becomes a row per kept sample."""
    for batch in batches:
        landing = _Landing(batch)
        for first, last in landing.chunks():
            yield landing.rows(first, last)
