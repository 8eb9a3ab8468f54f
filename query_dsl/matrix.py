"""The value type of the language: a set of series on one aligned time axis.

A :class:`Matrix` holds, for ``S`` series and ``T`` instants, names and label sets (one per
series; shared between matrices, so never changed in place), the instants (epoch ms,
ascending, evenly spaced by ``step_ms``) and a float64 ``[S, T]`` array with NaN where a
series has no value. Everything is vectorized over it.

Series identity is kept by columns (:class:`~query_dsl.series_table.SeriesTable`): the
frameworks class, match and filter series on integer codes, and ``names`` / ``labels`` are
Python lists made only when read. A matrix built from lists keeps them and makes its table
when an operation needs it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from query_dsl.series_table import SeriesTable

__all__ = ["Matrix"]


class Matrix:
    __slots__ = ("_labels", "_names", "_table", "step_ms", "timestamps", "values")
    timestamps: np.ndarray
    values: np.ndarray
    step_ms: int

    def __init__(
        self,
        names: list[str],
        labels: list[dict[str, str]],
        timestamps: np.ndarray | list[int],
        values: np.ndarray | list[list[float]],
        step_ms: int,
    ) -> None:
        if len(labels) != len(names):
            raise ValueError(f"{len(names)} names but {len(labels)} label sets")
        self._names: list[str] | None = names
        self._labels: list[dict[str, str]] | None = labels
        self._table: SeriesTable | None = None
        self._set_axis(timestamps, values, step_ms)

    @classmethod
    def from_table(
        cls, table: SeriesTable, timestamps: np.ndarray, values: np.ndarray, step_ms: int
    ) -> Matrix:
        matrix = cls.__new__(cls)
        matrix._names = matrix._labels = None
        matrix._table = table
        matrix._set_axis(timestamps, values, step_ms)
        return matrix

    def _set_axis(self, timestamps: np.ndarray | list[int], values: Any, step_ms: int) -> None:
        self.timestamps = np.asarray(timestamps, dtype=np.int64)
        self.values = np.asarray(values, dtype=np.float64).reshape(len(self), len(self.timestamps))
        self.step_ms = step_ms

    @property
    def table(self) -> SeriesTable:
        if self._table is None:
            assert self._names is not None and self._labels is not None  # one of the two is kept
            self._table = SeriesTable.from_lists(self._names, self._labels)
        return self._table

    @property
    def names(self) -> list[str]:
        if self._names is None:
            self._names = self.table.name_list()
        return self._names

    @property
    def labels(self) -> list[dict[str, str]]:
        if self._labels is None:
            self._labels = self.table.label_dicts()
        return self._labels

    def __len__(self) -> int:
        return len(self._names) if self._names is not None else len(self.table)

    def __repr__(self) -> str:
        return f"Matrix({len(self)} series x {len(self.timestamps)} instants, step {self.step_ms} ms)"

    def with_values(self, values: np.ndarray, names: list[str] | None = None) -> Matrix:
        """The same series and instants with other values (label sets shared: they are
        never changed in place)."""
        table = self.table if names is None else self.table.with_names(names)
        result = Matrix.from_table(table, self.timestamps, values, self.step_ms)
        result._labels = self._labels
        if names is None:
            result._names = self._names
        return result

    def select(self, rows: np.ndarray | list[int]) -> Matrix:
        index = np.asarray(rows, dtype=np.int64)
        return Matrix.from_table(self.table.take(index), self.timestamps, self.values[index], self.step_ms)

    def series_keys(self) -> list[str]:
        from bookkeeper.wire import format_series

        return [
            format_series(name or "_", labels) for name, labels in zip(self.names, self.labels, strict=True)
        ]

    def to_records(self) -> list[dict[str, Any]]:
        """JSON-ready: one dict per series, NaN as None."""
        timestamps = self.timestamps.tolist()
        rows = self.values.tolist()  # one C-level conversion for the whole matrix
        gappy = np.isnan(self.values).any(axis=1).tolist()
        out = []
        for name, labels, row, has_nan in zip(self.names, self.labels, rows, gappy, strict=True):
            values = [None if v != v else v for v in row] if has_nan else row
            out.append({"name": name, "labels": labels, "timestamps": timestamps, "values": values})
        return out

    def to_pandas(self) -> Any:
        """A DataFrame indexed by time (UTC), a column per series (its canonical key)."""
        import pandas as pd

        index = pd.to_datetime(self.timestamps, unit="ms", utc=True)
        return pd.DataFrame(self.values.T, index=index, columns=self.series_keys())
