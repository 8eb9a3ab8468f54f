"""The columnar sample batch: every variable of one context at one instant.

A batch holds one row per variable in parallel numpy columns; names and label sets are
stored once and referenced by id. Nothing here creates a Python object per sample unless
asked to (:meth:`SampleBatch.samples`, for tests and small tools).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from bookkeeper._thrift import PROTOCOL_VERSION, endpoint_thrift
from bookkeeper.exceptions import MalformedFrameError
from bookkeeper.labels import format_labels, parse_labels, series_keys
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
        """The batch as a store ingests it: numeric rows (booleans as 0/1) and STRING rows
        apart, each with its series key; ``timestamp_ms`` replaces every sample's own time
        (an agent's round time)."""
        keys = self.series_keys()
        stamps = self.timestamps if timestamp_ms is None else np.full(len(self), timestamp_ms, dtype=np.int64)
        is_string = self.types == VarType.STRING
        if not is_string.any():
            return IngestColumns(keys, self.numeric_values(), stamps)
        numeric = np.flatnonzero(~is_string)
        text_rows = np.flatnonzero(is_string)
        return IngestColumns(
            [keys[i] for i in numeric.tolist()],
            self.numeric_values()[numeric],
            stamps[numeric],
            [keys[i] for i in text_rows.tolist()],
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


@dataclass(frozen=True, eq=False)
class IngestColumns:
    """Samples as a store ingests them, in parallel columns: numeric samples (series key,
    float64 value, epoch-ms time) and STRING samples (series key, text, time). What an
    agent's sink, a VHMS and a backfill from the history exchange."""

    keys: list[str]
    values: np.ndarray
    timestamps: np.ndarray
    string_keys: list[str] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    string_timestamps: np.ndarray = field(default_factory=lambda: _NO_TIMES)

    def __len__(self) -> int:
        return len(self.keys) + len(self.string_keys)

    @classmethod
    def concat(cls, parts: Iterable[IngestColumns]) -> IngestColumns:
        parts = list(parts)
        if len(parts) == 1:
            return parts[0]
        return cls(
            [key for part in parts for key in part.keys],
            np.concatenate([p.values for p in parts]) if parts else np.zeros(0),
            np.concatenate([p.timestamps for p in parts]) if parts else _NO_TIMES,
            [key for part in parts for key in part.string_keys],
            [text for part in parts for text in part.strings],
            np.concatenate([p.string_timestamps for p in parts]) if parts else _NO_TIMES,
        )

    def take(self, rows: np.ndarray, string_rows: np.ndarray) -> IngestColumns:
        """The numeric samples ``rows`` and the STRING samples ``string_rows``."""
        return IngestColumns(
            [self.keys[i] for i in rows.tolist()],
            self.values[rows],
            self.timestamps[rows],
            [self.string_keys[i] for i in string_rows.tolist()],
            [self.strings[i] for i in string_rows.tolist()],
            self.string_timestamps[string_rows],
        )
