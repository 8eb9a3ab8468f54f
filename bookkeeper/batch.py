"""The columnar sample batch: every variable of one context at one instant.

A batch holds one row per variable in parallel numpy columns; names and label sets are
stored once and referenced by id. Nothing here creates a Python object per sample unless
asked to (:meth:`SampleBatch.samples`, for tests and small tools).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from bookkeeper._thrift import PROTOCOL_VERSION, endpoint_thrift
from bookkeeper.exceptions import MalformedFrameError
from bookkeeper.labels import format_labels, merged_label_texts, parse_labels, series_keys
from bookkeeper.vartype import VarType

__all__ = ["IngestColumns", "Sample", "SampleBatch"]

_VALID_TYPES = np.array([t.value for t in VarType], dtype=np.uint8)


class Sample(NamedTuple):
    """One variable instance, for tests and tools (hot paths use the columns)."""

    name: str
    labels: dict[str, str]
    type: VarType
    value: int | float | bool | str
    timestamp_ms: int


@dataclass(frozen=True, eq=False)
class SampleBatch:
    """Every variable of one context; see ``endpoint.thrift`` for the meaning of each column."""

    context: str
    snapshot_ms: int
    common_labels: dict[str, str]
    names: list[str]
    label_sets: list[str]
    name_ids: np.ndarray
    label_set_ids: np.ndarray
    types: np.ndarray
    values: np.ndarray
    timestamps: np.ndarray
    strings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.types)

    @property
    def doubles(self) -> np.ndarray:
        """The value column read as float64 (meaningful where ``types == DOUBLE``)."""
        return self.values.view(np.float64)

    def numeric_values(self) -> np.ndarray:
        """Values as float64: integers and booleans converted, NaN for STRING rows."""
        out = self.values.astype(np.float64)
        is_double = self.types == VarType.DOUBLE
        out[is_double] = self.doubles[is_double]
        out[self.types == VarType.STRING] = np.nan
        return out

    def labels_of(self, row: int) -> dict[str, str]:
        """Labels of one row, framework labels included (the variable's own win)."""
        labels = dict(self.common_labels)
        labels.update(parse_labels(self.label_sets[self.label_set_ids[row]]))
        return labels

    def series_keys(self) -> list[str]:
        """Canonical ``name{labels}`` of each row, framework labels included
        (:func:`bookkeeper.labels.series_keys`)."""
        return series_keys(self.common_labels, self.names, self.label_sets, self.name_ids, self.label_set_ids)

    def ingest_columns(self, timestamp_ms: int | None = None) -> IngestColumns:
        """The batch as a store ingests it: its names and label sets once (each label set
        with the common labels merged, once), numeric rows (booleans as 0/1) and STRING rows
        apart, each a reference into them; ``timestamp_ms`` replaces every sample's own time
        (an agent's round time). No key string is made."""
        label_sets = merged_label_texts(self.common_labels, self.label_sets)
        stamps = self.timestamps if timestamp_ms is None else np.full(len(self), timestamp_ms, dtype=np.int64)
        is_string = self.types == VarType.STRING
        if not is_string.any():
            return IngestColumns(
                self.names, label_sets, self.name_ids, self.label_set_ids, self.numeric_values(), stamps
            )
        numeric = np.flatnonzero(~is_string)
        text_rows = np.flatnonzero(is_string)
        return IngestColumns(
            self.names,
            label_sets,
            self.name_ids[numeric],
            self.label_set_ids[numeric],
            self.numeric_values()[numeric],
            stamps[numeric],
            self.name_ids[text_rows],
            self.label_set_ids[text_rows],
            [self.strings[int(v)] for v in self.values[text_rows].tolist()],
            stamps[text_rows],
        )

    def samples(self) -> Iterator[Sample]:
        """One :class:`Sample` per row (slow path: a Python object per variable)."""
        doubles = self.doubles
        for row in range(len(self)):
            vartype = VarType(int(self.types[row]))
            raw = int(self.values[row])
            value: int | float | bool | str
            if vartype is VarType.DOUBLE:
                value = float(doubles[row])
            elif vartype is VarType.BOOLEAN:
                value = bool(raw)
            elif vartype is VarType.STRING:
                value = self.strings[raw]
            else:
                value = raw
            yield Sample(
                self.names[self.name_ids[row]],
                self.labels_of(row),
                vartype,
                value,
                int(self.timestamps[row]),
            )

    def validate(self) -> None:
        """Check that the columns agree with each other; raise ``MalformedFrameError`` if not."""
        n = len(self.types)
        for column in ("name_ids", "label_set_ids", "values", "timestamps"):
            if len(getattr(self, column)) != n:
                raise MalformedFrameError(
                    f"batch column {column} has {len(getattr(self, column))} rows, types has {n}"
                )
        if n == 0:
            return
        if not np.isin(self.types, _VALID_TYPES).all():
            raise MalformedFrameError("batch has an unknown variable type code")
        for ids, table, column in (
            (self.name_ids, self.names, "name_ids"),
            (self.label_set_ids, self.label_sets, "label_set_ids"),
        ):
            if ids.min() < 0 or ids.max() >= len(table):
                raise MalformedFrameError(f"batch column {column} points outside its table")
        string_refs = self.values[self.types == VarType.STRING]
        if len(string_refs) and (string_refs.min() < 0 or string_refs.max() >= len(self.strings)):
            raise MalformedFrameError("batch STRING value points outside the strings table")
        for table in (self.names, self.label_sets, self.strings):
            if any(not isinstance(s, str) for s in table):
                raise MalformedFrameError("batch has a string that is not valid UTF-8")

    @classmethod
    def from_samples(
        cls, context: str, samples: Iterable[Sample], common_labels: dict[str, str] | None = None
    ) -> SampleBatch:
        """A batch from :class:`Sample` objects (labels kept whole per row; for file sources
        and tests, where samples arrive one by one anyway)."""
        names: dict[str, int] = {}
        label_sets: dict[str, int] = {}
        name_ids: list[int] = []
        set_ids: list[int] = []
        types: list[int] = []
        timestamps: list[int] = []
        strings: list[str] = []
        values = []
        doubles: list[tuple[int, float]] = []
        for row, sample in enumerate(samples):
            name_ids.append(names.setdefault(sample.name, len(names)))
            set_ids.append(label_sets.setdefault(format_labels(sample.labels), len(label_sets)))
            types.append(sample.type)
            timestamps.append(sample.timestamp_ms)
            if sample.type is VarType.DOUBLE:
                doubles.append((row, float(sample.value)))
                values.append(0)
            elif sample.type is VarType.STRING:
                values.append(len(strings))
                strings.append(str(sample.value))
            else:
                values.append(int(sample.value))
        value_column = np.array(values, dtype=np.int64)
        if doubles:
            rows, numbers = zip(*doubles, strict=True)
            value_column.view(np.float64)[list(rows)] = numbers
        return cls(
            context=context,
            snapshot_ms=max(timestamps, default=0),
            common_labels=dict(common_labels or {}),
            names=list(names),
            label_sets=list(label_sets),
            name_ids=np.array(name_ids, dtype=np.int32),
            label_set_ids=np.array(set_ids, dtype=np.int32),
            types=np.array(types, dtype=np.uint8),
            values=value_column,
            timestamps=np.array(timestamps, dtype=np.int64),
            strings=strings,
        )

    def to_thrift(self) -> Any:
        """The ``VarBatch`` Thrift struct of this batch."""
        return endpoint_thrift.VarBatch(
            protocol_version=PROTOCOL_VERSION,
            context=self.context,
            snapshot_ms=self.snapshot_ms,
            common_labels=self.common_labels,
            names=self.names,
            label_sets=self.label_sets,
            name_ids=self.name_ids.astype("<i4", copy=False).tobytes(),
            label_set_ids=self.label_set_ids.astype("<i4", copy=False).tobytes(),
            types=self.types.astype(np.uint8, copy=False).tobytes(),
            values=self.values.astype("<i8", copy=False).tobytes(),
            timestamps=self.timestamps.astype("<i8", copy=False).tobytes(),
            strings=self.strings,
        )

    @classmethod
    def from_thrift(cls, struct: Any) -> SampleBatch:
        """Decode and validate a ``VarBatch`` struct; ``MalformedFrameError`` if it is not one."""
        try:
            batch = cls(
                context=struct.context,
                snapshot_ms=struct.snapshot_ms,
                common_labels=dict(struct.common_labels),
                names=list(struct.names),
                label_sets=list(struct.label_sets),
                name_ids=np.frombuffer(struct.name_ids, dtype="<i4"),
                label_set_ids=np.frombuffer(struct.label_set_ids, dtype="<i4"),
                types=np.frombuffer(struct.types, dtype=np.uint8),
                values=np.frombuffer(struct.values, dtype="<i8"),
                timestamps=np.frombuffer(struct.timestamps, dtype="<i8"),
                strings=list(struct.strings),
            )
        except (TypeError, ValueError) as exc:
            raise MalformedFrameError(f"not a VarBatch: {exc}") from None
        if not isinstance(batch.context, str) or not isinstance(batch.snapshot_ms, int):
            raise MalformedFrameError("VarBatch lacks its context or snapshot time")
        batch.validate()
        return batch


_NO_TIMES = np.zeros(0, dtype=np.int64)
_NO_IDS = np.zeros(0, dtype=np.int32)


@dataclass(frozen=True, eq=False)
class IngestColumns:
    """Samples as a store ingests them, by the batch's own symbol table (as Prometheus
    remote-write 2.0 carries them): the series' names and label sets once (a label set as
    its canonical text, the batch's common labels merged), then per numeric sample a series
    reference (name id, label-set id), a float64 value and an epoch-ms time; per STRING
    sample a reference, a text and a time. No key string per sample: what an agent's sink,
    a VHMS and a backfill from the history exchange (``vhms/vhms.thrift``)."""

    names: list[str]
    label_sets: list[str]
    name_ids: np.ndarray
    set_ids: np.ndarray
    values: np.ndarray
    timestamps: np.ndarray
    string_name_ids: np.ndarray = field(default_factory=lambda: _NO_IDS)
    string_set_ids: np.ndarray = field(default_factory=lambda: _NO_IDS)
    strings: list[str] = field(default_factory=list)
    string_timestamps: np.ndarray = field(default_factory=lambda: _NO_TIMES)

    def __len__(self) -> int:
        return len(self.name_ids) + len(self.string_name_ids)

    @classmethod
    def from_keys(
        cls,
        keys: Sequence[str],
        values: np.ndarray,
        timestamps: np.ndarray,
        string_keys: Sequence[str] = (),
        strings: Sequence[str] = (),
        string_timestamps: np.ndarray = _NO_TIMES,
    ) -> IngestColumns:
        """From canonical keys ``name{labels}`` (split once each: for rules, backfills and
        tests, which have keys already)."""
        names: dict[str, int] = {}
        sets: dict[str, int] = {}

        def refs(of: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
            name_ids, set_ids = [], []
            for key in of:
                name, _, rest = key.partition("{")
                name_ids.append(names.setdefault(name, len(names)))
                set_ids.append(sets.setdefault(rest[:-1], len(sets)))
            return np.array(name_ids, dtype=np.int32), np.array(set_ids, dtype=np.int32)

        name_ids, set_ids = refs(keys)
        string_name_ids, string_set_ids = refs(string_keys)
        return cls(
            list(names),
            list(sets),
            name_ids,
            set_ids,
            np.asarray(values, dtype=np.float64),
            np.asarray(timestamps, dtype=np.int64),
            string_name_ids,
            string_set_ids,
            list(strings),
            np.asarray(string_timestamps, dtype=np.int64),
        )

    def keys(self) -> list[str]:
        """The canonical key of each numeric sample (made one by one: for a text edge)."""
        return self._keys(self.name_ids, self.set_ids)

    def string_keys(self) -> list[str]:
        """The canonical key of each STRING sample (made one by one: for a text edge)."""
        return self._keys(self.string_name_ids, self.string_set_ids)

    def _keys(self, name_ids: np.ndarray, set_ids: np.ndarray) -> list[str]:
        names, sets = self.names, self.label_sets
        return [f"{names[n]}{{{sets[s]}}}" for n, s in zip(name_ids.tolist(), set_ids.tolist(), strict=True)]

    def validate(self) -> None:
        """Check that the columns agree; ``MalformedFrameError`` if not."""
        for name_ids, set_ids, values, times, what in (
            (self.name_ids, self.set_ids, self.values, self.timestamps, "numeric"),
            (self.string_name_ids, self.string_set_ids, self.strings, self.string_timestamps, "STRING"),
        ):
            if not len(name_ids) == len(set_ids) == len(values) == len(times):
                raise MalformedFrameError(
                    f"{what} columns of different lengths: {len(name_ids)} name ids, {len(set_ids)} "
                    f"label set ids, {len(values)} values, {len(times)} timestamps"
                )
            for ids, table, column in (
                (name_ids, self.names, "name"),
                (set_ids, self.label_sets, "label set"),
            ):
                if len(ids) and (ids.min() < 0 or ids.max() >= len(table)):
                    raise MalformedFrameError(
                        f"a {what} {column} id points outside the {len(table)} {column}s"
                    )

    @classmethod
    def concat(cls, parts: Iterable[IngestColumns]) -> IngestColumns:
        """The samples of ``parts`` in one symbol table (each name and label set once)."""
        parts = list(parts)
        if len(parts) == 1:
            return parts[0]
        names: dict[str, int] = {}
        sets: dict[str, int] = {}
        columns: dict[str, list[np.ndarray]] = {c: [] for c in ("n", "s", "sn", "ss")}
        for part in parts:
            name_map = np.array([names.setdefault(n, len(names)) for n in part.names] or [0], dtype=np.int32)
            set_map = np.array(
                [sets.setdefault(t, len(sets)) for t in part.label_sets] or [0], dtype=np.int32
            )
            columns["n"].append(name_map[part.name_ids])
            columns["s"].append(set_map[part.set_ids])
            columns["sn"].append(name_map[part.string_name_ids])
            columns["ss"].append(set_map[part.string_set_ids])

        def joined(arrays: list[np.ndarray], dtype: type) -> np.ndarray:
            return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype=dtype)

        return cls(
            list(names),
            list(sets),
            joined(columns["n"], np.int32),
            joined(columns["s"], np.int32),
            joined([p.values for p in parts], np.float64),
            joined([p.timestamps for p in parts], np.int64),
            joined(columns["sn"], np.int32),
            joined(columns["ss"], np.int32),
            [text for part in parts for text in part.strings],
            joined([p.string_timestamps for p in parts], np.int64),
        )

    def take(self, rows: np.ndarray, string_rows: np.ndarray) -> IngestColumns:
        """The numeric samples ``rows`` and the STRING samples ``string_rows`` (the symbol
        table kept whole)."""
        return IngestColumns(
            self.names,
            self.label_sets,
            self.name_ids[rows],
            self.set_ids[rows],
            self.values[rows],
            self.timestamps[rows],
            self.string_name_ids[string_rows],
            self.string_set_ids[string_rows],
            [self.strings[i] for i in string_rows.tolist()],
            self.string_timestamps[string_rows],
        )
