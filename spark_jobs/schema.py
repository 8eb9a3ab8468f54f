"""The Spark schemas: landing records in (``bookkeeper/ground/landing_batch.avsc``), records
grouped by endpoint through the dedupe (``dedupe.py``) and its state, sample rows out (the
Parquet layout, docs/spark.md)."""

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

__all__ = ["CHECKED", "DEDUPED", "DEDUPE_STATE", "GROUPED", "KEPT", "LANDED", "LANDING", "SAMPLES"]

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

# The landing records as read (their integrity stamp last), and as checked (integrity.py):
# with the landing file each came from and why it cannot be stored (null: it can).
LANDED = StructType([*LANDING.fields, StructField("checksum", LongType())])
CHECKED = StructType([*LANDED.fields, StructField("file", StringType()), StructField("damage", StringType())])

# The landing records as the dedupe groups them: by their common labels as canonical JSON
# (an endpoint's identity), with the event time the watermark follows.
GROUPED = StructType(
    [
        StructField("group", StringType()),
        StructField("event", TimestampType()),
        *(field for field in LANDING.fields if field.name != "common_labels"),
    ]
)
DEDUPED = StructType([*GROUPED.fields, StructField("keep", BinaryType())])  # null: keep every sample
# What explode reads: the landing records the dedupe let through, with their masks.
KEPT = StructType([*LANDING.fields, StructField("keep", BinaryType())])
DEDUPE_STATE = StructType(
    [
        StructField("round_times", BinaryType()),  # int64 LE per entry
        StructField("round_shapes", BinaryType()),  # int32 LE per entry: an index into shapes
        # the shapes one after the other (an array of binary fails in PySpark's state schema)
        StructField("shape_lengths", BinaryType()),  # int32 LE: digests per shape
        StructField("shapes", BinaryType()),  # uint64 LE series digests, each shape sorted
        StructField("pairs", BinaryType()),  # uint64 LE (series, time) digests of roundless samples
        StructField("pair_times", BinaryType()),  # int64 LE per pair
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
