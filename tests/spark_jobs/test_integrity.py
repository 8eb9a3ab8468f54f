"""The Parquet writer's integrity check on Arrow batches as Spark hands them over: a landing
record is encoded again exactly as its agent wrote it (long strings, empty lists, null
fields, common labels in any order), so every intact record passes and every altered one is
marked."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pyarrow as pa

from bookkeeper import Bookkeeper
from bookkeeper.ground import LANDING_SCHEMA, encode_checksum, encode_identity, encode_sample_batch
from collector_agent import event_checksum
from spark_jobs.integrity import MISMATCH, check_landed

PARSED = fastavro.parse_schema(LANDING_SCHEMA)
ARROW = pa.schema(
    [
        ("context", pa.string()),
        ("snapshot_ms", pa.int64()),
        ("common_labels", pa.map_(pa.string(), pa.string())),
        ("names", pa.list_(pa.string())),
        ("label_sets", pa.list_(pa.string())),
        *((name, pa.binary()) for name in ("name_ids", "label_set_ids", "types", "values", "timestamps")),
        ("strings", pa.list_(pa.string())),
        ("round_ms", pa.int64()),
        ("endpoint", pa.string()),
        ("agent", pa.string()),
        ("checksum", pa.int64()),
        ("file", pa.string()),
    ]
)


def landed(n: int, altered: bool) -> dict[str, Any]:
    """A landing record as Spark reads it; ``altered``: a byte changed after its stamp."""
    bk = Bookkeeper(f"app-{n}", labels={"zone": "z", "module": f"m{n}"}, environ={})
    for i in range(n % 4 * 40):  # none, or up to 120 variables
        bk.integer("requests", path=f"/p{i}", long="x" * (1 + i * 3)).set(i)
    if n % 2:
        bk.string("version").set("é" * (50 * n))  # lengths of two- and three-byte varints
    body = encode_sample_batch(bk.snapshot())
    headers = {"artimon.round": str(1_700_000_000_000 + n), "artimon.endpoint": f"10.0.0.{n}:1:u"}
    agent = "a1" if n % 3 else None
    if agent:
        headers["artimon.agent"] = agent
    stamp = event_checksum(body, headers)
    if altered:
        body = body.replace(f"app-{n}".encode(), f"apq-{n}".encode(), 1)
    identity = encode_identity(1_700_000_000_000 + n, headers["artimon.endpoint"], agent)
    record = fastavro.schemaless_reader(io.BytesIO(body + identity + encode_checksum(stamp)), PARSED, None)
    assert isinstance(record, dict)
    labels = list(record["common_labels"].items())
    return {**record, "common_labels": labels[::-1], "file": "f.avro"}  # Spark keeps no map order


def test_intact_records_pass_and_altered_ones_are_marked() -> None:
    altered = {3, 4, 9}
    records = [landed(n, n in altered) for n in range(12)]
    records.append({**landed(12, False), "checksum": None})  # landed before stamps
    batch = pa.Table.from_pylist(records, schema=ARROW).combine_chunks().to_batches()[0]
    (out,) = check_landed(iter([batch]))
    damage = out.column("damage").to_pylist()
    assert [n for n, reason in enumerate(damage) if reason is not None] == sorted(altered)
    assert {damage[n] for n in altered} == {MISMATCH}
    assert out.num_rows == batch.num_rows and out.column("endpoint") == batch.column("endpoint")
