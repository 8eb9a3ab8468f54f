"""Landing records (one per sample batch) to sample rows, vectorized with numpy per batch.

Series keys are built once per (labels of the context, name, label set) and cached across
batches: the same series come back every round.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from bookkeeper.labels import format_series, parse_labels
from bookkeeper.vartype import VarType

__all__ = ["explode_batches"]


@lru_cache(maxsize=1 << 20)
def _series_key(common: tuple[tuple[str, str], ...], name: str, label_set: str) -> str:
    labels = dict(common)
    labels.update(parse_labels(label_set))
    return format_series(name, labels)


def _rows(record: dict[str, Any]) -> pd.DataFrame:
    name_ids = np.frombuffer(record["name_ids"], dtype="<i4")
    set_ids = np.frombuffer(record["label_set_ids"], dtype="<i4")
    types = np.frombuffer(record["types"], dtype=np.uint8)
    raw = np.frombuffer(record["values"], dtype="<i8")
    stamps = np.frombuffer(record["timestamps"], dtype="<i8")
    names = list(record["names"])
    label_sets = list(record["label_sets"])
    common_raw = record["common_labels"]
    common = tuple(sorted(dict(common_raw).items())) if common_raw is not None else ()
    keys = [
        _series_key(common, names[n], label_sets[s])
        for n, s in zip(name_ids.tolist(), set_ids.tolist(), strict=True)
    ]
    values = raw.astype(np.float64)
    doubles = types == VarType.DOUBLE
    values[doubles] = raw.view(np.float64)[doubles]
    is_string = types == VarType.STRING
    string_values = np.full(len(types), None, dtype=object)
    if is_string.any():
        strings = list(record["strings"])
        string_values[is_string] = [strings[int(i)] for i in raw[is_string]]
    round_ms = record["round_ms"]
    when = np.full(len(types), int(round_ms), dtype=np.int64) if pd.notna(round_ms) else stamps
    moments = when.astype("datetime64[ms]")
    day = np.datetime_as_string(moments, unit="D")
    hour = np.char.rjust((moments.astype("datetime64[h]").astype(np.int64) % 24).astype(str), 2, "0")
    return pd.DataFrame(
        {
            "series": keys,
            "type": types.astype(np.int8),
            "value": pd.Series(values, dtype="Float64").mask(is_string),  # null for STRING
            "string_value": string_values,
            "ts": pd.to_datetime(when, unit="ms", utc=True),
            "sample_ts_ms": stamps,
            "context": record["context"],
            "date": day,
            "hour": hour,
        }
    )


def explode_batches(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """For ``mapInPandas``: each landing record becomes a row per sample."""
    for frame in frames:
        parts = [_rows(record) for record in frame.to_dict("records")]
        if parts:
            yield pd.concat(parts, ignore_index=True)
