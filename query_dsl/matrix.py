"""The value type of the language: a set of series on one aligned time axis.

A :class:`Matrix` holds, for ``S`` series and ``T`` instants, names and label sets (one per
series; shared between matrices, so never changed in place), the instants (epoch ms,
ascending, evenly spaced by ``step_ms``) and a float64 ``[S, T]`` array with NaN where a
series has no value. Everything is vectorized over it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Matrix"]


@dataclass
class Matrix:
    names: list[str]
    labels: list[dict[str, str]]
    timestamps: np.ndarray
    values: np.ndarray
    step_ms: int

    def __post_init__(self) -> None:
        self.timestamps = np.asarray(self.timestamps, dtype=np.int64)
        self.values = np.asarray(self.values, dtype=np.float64).reshape(len(self.names), len(self.timestamps))
        if len(self.labels) != len(self.names):
            raise ValueError(f"{len(self.names)} names but {len(self.labels)} label sets")

    def __len__(self) -> int:
        return len(self.names)

    def with_values(self, values: np.ndarray, names: list[str] | None = None) -> Matrix:
        """The same series and instants with other values (label sets shared: they are
        never changed in place)."""
        return Matrix(
            list(names if names is not None else self.names),
            list(self.labels),
            self.timestamps,
            values,
            self.step_ms,
        )

    def select(self, rows: np.ndarray | list[int]) -> Matrix:
        index = np.asarray(rows, dtype=np.int64).tolist()
        return Matrix(
            [self.names[i] for i in index],
            [self.labels[i] for i in index],
            self.timestamps,
            self.values[np.asarray(index, dtype=np.int64)],
            self.step_ms,
        )

    def series_keys(self) -> list[str]:
        from bookkeeper.labels import format_series

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
