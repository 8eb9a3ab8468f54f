"""The Spark schemas: landing records in (``bookkeeper/landing_batch.avsc``), sample rows
out (the Parquet layout, docs/spark.md)."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = ["LANDING", "SAMPLES"]

LANDING = StructType(
    [
        StructField("context", StringType()),
        StructField("snapshot_ms", LongType()),
        StructField("common_labels", MapType(StringType(), StringType())),
        StructField("names", ArrayType(StringType())),
        StructField("label_sets", ArrayType(StringType())),
        StructField("name_ids", BinaryType()),
        StructField("label_set_ids", BinaryType()),
        StructField("types", BinaryType()),
        StructField("values", BinaryType()),
        StructField("timestamps", BinaryType()),
        StructField("strings", ArrayType(StringType())),
        StructField("round_ms", LongType()),
        StructField("endpoint", StringType()),
        StructField("agent", StringType()),
    ]
)

SAMPLES = StructType(
    [
        StructField("series", StringType(), False),  # canonical name{labels}, framework labels included
        StructField("type", ByteType(), False),  # 0 INTEGER, 1 DOUBLE, 2 BOOLEAN, 3 STRING
        StructField("value", DoubleType(), True),  # null for STRING
        StructField("string_value", StringType(), True),
        StructField("ts", TimestampType(), False),  # the sample's time (the round's when present)
        StructField("sample_ts_ms", LongType(), False),  # the app's own timestamp
        StructField("context", StringType(), False),
        StructField("date", StringType(), False),  # partitions: yyyy-mm-dd, hh (UTC)
        StructField("hour", StringType(), False),
    ]
)
