"""The agents' Kafka topic as landing records: what ``raw_ingest --kafka`` reads instead of
landing files, through Spark's own Kafka source (``readStream.format("kafka")``, whose
connector jars the session must carry: ``artimon spark`` and ``artimon up`` add them).

A record is what the agent's Kafka sink publishes in its default form
(``useFlumeEventFormat=false``): the value is the event's body, an Avro sample batch
(``bookkeeper/ground/sample_batch.avsc``, decoded in the JVM by ``from_avro``), and the
event's headers ``artimon.round``, ``artimon.endpoint`` and ``artimon.agent`` are record
headers, which become the landing record's ``round_ms``, ``endpoint`` and ``agent`` as the
raw sink's trailer carries them. The result has the columns of a landing file
(:data:`~spark_jobs.schema.LANDING`), so the dedupe and the Parquet writing are the landing
path's own.

Offsets are the query's: Spark keeps them in the checkpoint (no consumer group commits), so
a query started again goes on from the last committed micro-batch, and a micro-batch's
Parquet files and its offsets commit together (exactly-once output). The first start reads
the topic from its earliest record. A value that is not a sample batch (a foreign record, an
AvroFlumeEvent) is skipped (``from_avro``'s permissive mode) and counted in the query's
progress as rows in, none out; a record lost from the topic before it was read (retention)
fails the query (``failOnDataLoss``) rather than leaving a silent hole in the history.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from bookkeeper.ground import SAMPLE_BATCH_SCHEMA
from spark_jobs.schema import LANDING

__all__ = ["kafka_records"]

_SAMPLE_BATCH = json.dumps(SAMPLE_BATCH_SCHEMA)


def _header(name: str) -> Column:
    """The first record header ``name`` as text; null when the record has none."""
    found = F.filter("headers", lambda header: header["key"] == F.lit(name))
    return F.try_element_at(found, F.lit(1))["value"].cast("string")


def kafka_records(spark: Any, bootstrap: str, topic: str, max_records: int | None) -> Any:
    """The topic's records as a stream of landing records (see the module doc)."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("failOnDataLoss", "true")
    )
    if max_records is not None:
        reader = reader.option("maxOffsetsPerTrigger", max_records)
    batches = reader.load().select(
        from_avro(F.col("value"), _SAMPLE_BATCH, {"mode": "PERMISSIVE"}).alias("batch"),
        _header("artimon.round").alias("round"),
        _header("artimon.endpoint").alias("endpoint"),
        _header("artimon.agent").alias("agent"),
    )
    carried = [name for name in LANDING.fieldNames() if name not in ("round_ms", "endpoint", "agent")]
    return batches.where(F.col("batch").isNotNull()).select(
        *(F.col(f"batch.{name}").alias(name) for name in carried),
        F.when(F.col("round").rlike("^[0-9]{1,18}$"), F.col("round").cast("long")).alias("round_ms"),
        "endpoint",
        "agent",
    )
