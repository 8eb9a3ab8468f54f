"""The Avro form of a :class:`~bookkeeper.batch.SampleBatch` (schema: ``sample_batch.avsc``),
the body of the events Artimon's agent sources emit. Schemaless encoding: the schema is
this repository's, both ends know it."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import numpy as np

from bookkeeper import MalformedFrameError, SampleBatch

__all__ = ["SAMPLE_BATCH_SCHEMA", "decode_sample_batch", "encode_sample_batch"]

SAMPLE_BATCH_SCHEMA: Any = fastavro.parse_schema(
    json.loads(Path(__file__).with_name("sample_batch.avsc").read_text())
)


def encode_sample_batch(batch: SampleBatch) -> bytes:
    """The Avro bytes of ``batch``, its common labels in key order: one encoding per batch,
    which Spark's check of a landing record can rebuild (Spark's Avro reader keeps no map
    order; ``spark_jobs/integrity.py``)."""
    out = io.BytesIO()
    fastavro.schemaless_writer(
        out,
        SAMPLE_BATCH_SCHEMA,
        {
            "context": batch.context,
            "snapshot_ms": batch.snapshot_ms,
            "common_labels": dict(sorted(batch.common_labels.items())),
            "names": batch.names,
            "label_sets": batch.label_sets,
            "name_ids": batch.name_ids.astype("<i4", copy=False).tobytes(),
            "label_set_ids": batch.label_set_ids.astype("<i4", copy=False).tobytes(),
            "types": batch.types.astype(np.uint8, copy=False).tobytes(),
            "values": batch.values.astype("<i8", copy=False).tobytes(),
            "timestamps": batch.timestamps.astype("<i8", copy=False).tobytes(),
            "strings": batch.strings,
        },
    )
    return out.getvalue()


def decode_sample_batch(data: bytes) -> SampleBatch:
    """Decode and validate; ``MalformedFrameError`` if ``data`` is not a sample batch."""
    try:
        record: Any = fastavro.schemaless_reader(io.BytesIO(data), SAMPLE_BATCH_SCHEMA, None)
        batch = SampleBatch(
            context=record["context"],
            snapshot_ms=record["snapshot_ms"],
            common_labels=record["common_labels"],
            names=record["names"],
            label_sets=record["label_sets"],
            name_ids=np.frombuffer(record["name_ids"], dtype="<i4"),
            label_set_ids=np.frombuffer(record["label_set_ids"], dtype="<i4"),
            types=np.frombuffer(record["types"], dtype=np.uint8),
            values=np.frombuffer(record["values"], dtype="<i8"),
            timestamps=np.frombuffer(record["timestamps"], dtype="<i8"),
            strings=record["strings"],
        )
    except (
        EOFError,
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        UnicodeDecodeError,
        MemoryError,
        OverflowError,
    ) as exc:
        raise MalformedFrameError(f"not an Avro sample batch: {exc!r}") from None
    batch.validate()
    return batch
