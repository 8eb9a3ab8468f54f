"""The Parquet history as a query language data source: ``fetch`` reads the samples of a
time range and aligns them on buckets (the last sample of each, :func:`aligned`), as VHMS
does, so any query of the language runs over the history. :class:`ParquetSource` reads
with Spark and brings the selected series to the driver (a few series, a notebook);
:class:`FrameSource` answers from the samples of one group already on an executor, where
``analyze`` runs its fetches (``distributed.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from bookkeeper.wire import parse_series_shared
from vhms import FetchResult, Matcher, parse_selector

__all__ = ["FrameSource", "ParquetSource", "aligned", "last_in_buckets", "matching_series"]


def matching_series(keys: list[str], selector: str) -> list[str]:
    """The keys a VHMS selector picks."""
    parsed = parse_selector(selector)
    matchers: list[Matcher] = [m for m in (parsed.name, *parsed.matchers) if m is not None]
    chosen = []
    for key in keys:
        name, labels = parse_series_shared(key)
        if all(m.matches(name if m.label == "__name__" else labels.get(m.label)) for m in matchers):
            chosen.append(key)
    return chosen


def last_in_buckets(
    rows: np.ndarray,
    ts_ms: np.ndarray,
    values: np.ndarray,
    series: int,
    start_ms: int,
    end_ms: int,
    step_ms: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The buckets of ``step_ms`` within ``[start_ms, end_ms)`` (their start times) and a
    ``[series, buckets]`` array holding in each the value of the last sample (by time, NaN
    values skipped) of its series in it; samples by row (-1: none of the series), time, value."""
    first, last = -(-start_ms // step_ms), (end_ms - 1) // step_ms
    buckets = np.arange(first, last + 1, dtype=np.int64)
    out = np.full((series, len(buckets)), np.nan)
    columns = ts_ms // step_ms - first
    kept = (rows >= 0) & (columns >= 0) & (columns < len(buckets)) & ~np.isnan(values)
    cells = rows[kept] * len(buckets) + columns[kept]
    order = np.lexsort((ts_ms[kept], cells))  # by cell, then time (stable: ties keep their order)
    cells, latest = cells[order], values[kept][order]
    is_last = np.append(cells[1:] != cells[:-1], True) if len(cells) else np.zeros(0, dtype=bool)
    out.reshape(-1)[cells[is_last]] = latest[is_last]
    return buckets * step_ms, out


def aligned(rows: pd.DataFrame, keys: list[str], start_ms: int, end_ms: int, step_ms: int) -> FetchResult:
    """``keys`` (in that order) on the buckets of ``step_ms`` within ``[start_ms, end_ms)``,
    each holding the value of the last of ``rows`` (``series``, ``ts_ms``, ``value``: numbers
    only) in it; NaN where none."""
    timestamps, values = last_in_buckets(
        pd.Index(keys, dtype=object).get_indexer(rows["series"]),
        rows["ts_ms"].to_numpy(dtype=np.int64),
        rows["value"].to_numpy(dtype=float),
        len(keys),
        start_ms,
        end_ms,
        step_ms,
    )
    return FetchResult.from_keys(keys, timestamps, values, step_ms)


class _LabelsFromKeys:
    """Label names and values read from the series keys (a source's ``series``)."""

    def series(self, selector: str) -> list[str]:
        raise NotImplementedError

    def label_names(self) -> list[str]:
        return sorted({k for key in self.series("") for k in parse_series_shared(key)[1]})

    def label_values(self, label: str) -> list[str]:
        return sorted(
            {v for key in self.series("") for k, v in parse_series_shared(key)[1].items() if k == label}
        )


class FrameSource(_LabelsFromKeys):
    """The samples of some series as an Arrow table (``series``, ``ts_ms``, ``type``,
    ``value``: STRING samples count as a series without numbers), answering fetches over
    them alone: each series is wholly in the table or not at all. Keys are hashed once per
    fetch in Arrow (``dictionary_encode``), never as Python strings per sample."""

    def __init__(self, samples: pa.Table, step_s: int = 60) -> None:
        self.samples = samples
        self.step_s = step_s
        self.fetched: list[str] = []  # the keys the last fetch answered, in its order

    def fetch(self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto") -> FetchResult:
        step = (self.step_s if resolution == "auto" else int(resolution)) * 1000
        ts_ms = self.samples.column("ts_ms").to_numpy()
        inside = self.samples.filter(pa.array((ts_ms >= start_ms) & (ts_ms < end_ms)))
        encoded = pc.dictionary_encode(inside.column("series")).combine_chunks()
        names = encoded.dictionary.to_pylist()
        keys = matching_series(sorted(names), selector)
        row_of_name = (
            pd.Index(keys, dtype=object).get_indexer(names) if names else np.zeros(0, dtype=np.int64)
        )
        rows = row_of_name[encoded.indices.to_numpy(zero_copy_only=False)]
        numbers = pc.not_equal(inside.column("type"), 3).to_numpy(zero_copy_only=False)
        values = pc.fill_null(inside.column("value"), np.nan).to_numpy()
        timestamps, out = last_in_buckets(
            np.where(numbers, rows, -1),
            inside.column("ts_ms").to_numpy(),
            values,
            len(keys),
            start_ms,
            end_ms,
            step,
        )
        self.fetched = keys
        return FetchResult.from_keys(keys, timestamps, out, step)

    def series(self, selector: str) -> list[str]:
        return matching_series(sorted(pc.unique(self.samples.column("series")).to_pylist()), selector)

    def strings(self, selector: str) -> dict[str, tuple[int, str]]:
        """Nothing: the texts of STRING series are not part of a query's value."""
        return {}


class ParquetSource(_LabelsFromKeys):
    """Reads ``raw_ingest``'s output at ``path`` (``file://`` or ``hdfs://``)."""

    def __init__(self, spark: Any, path: str, step_s: int = 60) -> None:
        self.spark = spark
        self.path = path
        self.step_s = step_s

    def samples(self, start_ms: int, end_ms: int) -> Any:
        """The rows of ``[start_ms, end_ms)`` (only the days of the range are read)."""
        frame = self.spark.read.parquet(self.path)
        start = pd.Timestamp(start_ms, unit="ms", tz="UTC").to_pydatetime()
        end = pd.Timestamp(end_ms, unit="ms", tz="UTC").to_pydatetime()
        days = pd.date_range(start.date(), end.date(), freq="D").strftime("%Y-%m-%d").tolist()
        return frame.where(F.col("date").isin(days)).where(
            (F.col("ts") >= F.lit(start)) & (F.col("ts") < F.lit(end))
        )

    def _series_in(self, start_ms: int, end_ms: int) -> list[str]:
        rows = self.samples(start_ms, end_ms).select("series").distinct().collect()
        return sorted(row["series"] for row in rows)

    def fetch(self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto") -> FetchResult:
        step = (self.step_s if resolution == "auto" else int(resolution)) * 1000
        keys = matching_series(self._series_in(start_ms, end_ms), selector)
        rows = pd.DataFrame({"series": [], "ts_ms": [], "value": []})
        if keys:
            rows = (
                self.samples(start_ms, end_ms)
                .where(F.col("series").isin(keys) & (F.col("type") != 3))
                .select("series", (F.unix_millis("ts")).alias("ts_ms"), "value")
                .toPandas()
            )
        return aligned(rows, keys, start_ms, end_ms, step)

    def series(self, selector: str) -> list[str]:
        frame = self.spark.read.parquet(self.path).select("series").distinct().collect()
        return matching_series(sorted(row["series"] for row in frame), selector)

    def strings(self, selector: str) -> dict[str, tuple[int, str]]:
        """The last value and its time of each selected STRING series in the history."""
        keys = matching_series(self.series(selector), selector)
        if not keys:
            return {}
        latest = (
            self.spark.read.parquet(self.path)
            .where(F.col("series").isin(keys) & (F.col("type") == 3))
            .groupBy("series")
            .agg(F.max_by("string_value", "ts").alias("value"), F.unix_millis(F.max("ts")).alias("ts_ms"))
            .collect()
        )
        return {
            row["series"]: (int(row["ts_ms"]), row["value"])
            for row in sorted(latest, key=lambda r: r["series"])
        }
