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
from pyspark.sql import functions as F

from bookkeeper.wire import parse_series_shared
from vhms import FetchResult, Matcher, parse_selector

__all__ = ["FrameSource", "ParquetSource", "aligned", "matching_series"]


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


def aligned(rows: pd.DataFrame, keys: list[str], start_ms: int, end_ms: int, step_ms: int) -> FetchResult:
    """``keys`` (in that order) on the buckets of ``step_ms`` within ``[start_ms, end_ms)``,
    each holding the value of the last of ``rows`` (``series``, ``ts_ms``, ``value``: numbers
    only) in it; NaN where none."""
    first, last = -(-start_ms // step_ms), (end_ms - 1) // step_ms
    buckets = np.arange(first, last + 1, dtype=np.int64)
    values = np.full((len(keys), len(buckets)), np.nan)
    if keys and len(buckets) and len(rows):
        rows = rows.assign(bucket=rows["ts_ms"] // step_ms)
        latest = rows.sort_values("ts_ms", kind="stable").groupby(["series", "bucket"], sort=False).last()
        row_of = {key: i for i, key in enumerate(keys)}
        series_rows = np.array([row_of[s] for s in latest.index.get_level_values(0)])
        columns = latest.index.get_level_values(1).to_numpy() - first
        inside = (columns >= 0) & (columns < len(buckets))
        values[series_rows[inside], columns[inside]] = latest["value"].to_numpy(dtype=float)[inside]
    return FetchResult.from_keys(keys, buckets * step_ms, values, step_ms)


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
    """The samples of some series as a pandas frame (``series``, ``ts_ms``, ``type``,
    ``value``: STRING samples count as a series without numbers), answering fetches over
    them alone: each series is wholly in the frame or not at all."""

    def __init__(self, samples: pd.DataFrame, step_s: int = 60) -> None:
        self.samples = samples
        self.step_s = step_s
        self.fetched: list[str] = []  # the keys the last fetch answered, in its order

    def fetch(self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto") -> FetchResult:
        step = (self.step_s if resolution == "auto" else int(resolution)) * 1000
        inside = self.samples[(self.samples["ts_ms"] >= start_ms) & (self.samples["ts_ms"] < end_ms)]
        keys = matching_series(sorted(inside["series"].unique().tolist()), selector)
        numbers = inside[inside["type"] != 3]
        self.fetched = keys
        return aligned(numbers[numbers["series"].isin(keys)], keys, start_ms, end_ms, step)

    def series(self, selector: str) -> list[str]:
        return matching_series(sorted(self.samples["series"].unique().tolist()), selector)

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
