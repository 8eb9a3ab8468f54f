"""Synthetic data for tests and benchmarks of the Spark jobs: a Parquet history in
``raw_ingest``'s layout, written with pyarrow (no Spark, no landing files), for what reads
the history (``analyze``) at sizes that landing and ingesting would make slow to prepare;
and an endpoint's sample batch of one round (:func:`item_batch`), for what lands or
publishes them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bookkeeper import SampleBatch

__all__ = ["item_batch", "write_counters"]


def item_batch(endpoint: int, round_ms: int, variables: int, offset: int, names: list[str]) -> SampleBatch:
    """Endpoint ``endpoint``'s round at ``round_ms``: integers ``<names[i % len]>{item=<i>}``
    worth ``i + offset`` for ``i`` below ``variables``, read 500 ms before the round, in
    context ``app<endpoint>`` with the common labels ``context`` and ``host=h<endpoint>``."""
    return SampleBatch(
        context=f"app{endpoint}",
        snapshot_ms=round_ms,
        common_labels={"context": f"app{endpoint}", "host": f"h{endpoint}"},
        names=names,
        label_sets=[f"item={i}" for i in range(variables)],
        name_ids=(np.arange(variables) % len(names)).astype(np.int32),
        label_set_ids=np.arange(variables, dtype=np.int32),
        types=np.zeros(variables, dtype=np.uint8),
        values=np.arange(variables, dtype=np.int64) + offset,
        timestamps=np.full(variables, round_ms - 500, dtype=np.int64),
    )


def write_counters(root: Path, series: int, minutes: int, start_ms: int, dcs: int = 4) -> None:
    """``series`` counters ``app.requests{dc=dc<i % dcs>,host=h<i>}``, one sample a minute for
    ``minutes`` from ``start_ms`` (a minute boundary), series ``i`` worth ``i + minute * (i % 7)``;
    a file per minute under ``root/date=.../hour=...``, as ``raw_ingest`` partitions them."""
    index = np.arange(series)
    keys = pa.array([f"app.requests{{dc=dc{i % dcs},host=h{i}}}" for i in range(series)], pa.string())
    for minute in range(minutes):
        ts_ms = start_ms + minute * 60_000
        table = pa.table(
            {
                "series": keys,
                "type": pa.array(np.zeros(series, dtype=np.int8)),
                "value": (index + minute * (index % 7)).astype(np.float64),
                "string_value": pa.nulls(series, pa.string()),
                "ts": pa.array(np.full(series, ts_ms * 1000, dtype=np.int64), pa.timestamp("us", tz="UTC")),
                "sample_ts_ms": np.full(series, ts_ms, dtype=np.int64),
                "context": pa.array(np.full(series, "app", dtype=object), pa.string()),
            }
        )
        day = np.datetime64(ts_ms, "ms").astype("datetime64[D]")
        hour = root / f"date={day}" / f"hour={ts_ms // 3_600_000 % 24}"
        hour.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, hour / f"part-{minute:05d}.zstd.parquet", compression="zstd")
