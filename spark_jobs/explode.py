"""Landing records (one per sample batch) to sample rows, vectorized with numpy per batch."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from bookkeeper.labels import format_series, parse_labels
from bookkeeper.vartype import VarType

__all__ = ["explode_batches"]


def _rows(record: pd.Series) -> pd.DataFrame:
    name_ids = np.frombuffer(record["name_ids"], dtype="<i4")
    set_ids = np.frombuffer(record["label_set_ids"], dtype="<i4")
    types = np.frombuffer(record["types"], dtype=np.uint8)
    raw = np.frombuffer(record["values"], dtype="<i8")
    stamps = np.frombuffer(record["timestamps"], dtype="<i8")
    names = list(record["names"])
    label_sets = list(record["label_sets"])
    common = dict(record["common_labels"]) if record["common_labels"] is not None else {}
    pairs: dict[tuple[int, int], tuple[str, dict[str, str]]] = {}
    series, labels = [], []
    for pair in zip(name_ids.tolist(), set_ids.tolist(), strict=True):
        known = pairs.get(pair)
        if known is None:
            merged = dict(common)
            merged.update(parse_labels(label_sets[pair[1]]))
            known = pairs[pair] = (format_series(names[pair[0]], merged), merged)
        series.append(known[0])
        labels.append(known[1])
    values = raw.astype(np.float64)
    doubles = types == VarType.DOUBLE
    values[doubles] = raw.view(np.float64)[doubles]
    is_string = types == VarType.STRING
    strings = list(record["strings"]) if record["strings"] is not None else []
    string_values = np.array([None] * len(types), dtype=object)
    if is_string.any():
        string_values[is_string] = [strings[int(i)] for i in raw[is_string]]
    round_ms = record["round_ms"]
    when = np.full(len(types), int(round_ms), dtype=np.int64) if pd.notna(round_ms) else stamps
    times = pd.to_datetime(when, unit="ms", utc=True)
    return pd.DataFrame(
        {
            "series": series,
            "name": [names[i] for i in name_ids.tolist()],
            "labels": labels,
            "type": types.astype(np.int8),
            "value": pd.Series(values, dtype="Float64").mask(is_string),  # null for STRING
            "string_value": string_values,
            "ts": times,
            "sample_ts_ms": stamps,
            "context": record["context"],
            "date": times.strftime("%Y-%m-%d"),
            "hour": times.strftime("%H"),
        }
    )


def explode_batches(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """For ``mapInPandas``: each landing record becomes a row per sample."""
    for frame in frames:
        parts = [_rows(record) for _, record in frame.iterrows()]
        if parts:
            yield pd.concat(parts, ignore_index=True)
