"""``explode``: landing records (Arrow, as ``mapInArrow`` hands them) to sorted sample rows,
without Spark; through Spark in test_raw_ingest.py."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from bookkeeper import Bookkeeper
from bookkeeper.batch import SampleBatch
from bookkeeper.ground import LANDING_SCHEMA, encode_sample_batch, encode_trailer
from spark_jobs import explode
from spark_jobs.explode import explode_batches
from spark_jobs.schema import KEPT, SAMPLES

ROUND = 1_700_000_000_000
PARSED_LANDING = fastavro.parse_schema(LANDING_SCHEMA)


def record(batch: SampleBatch, round_ms: int | None = ROUND, **changes: Any) -> dict[str, Any]:
    data = encode_sample_batch(batch) + encode_trailer(round_ms, "10.0.0.1:1:u", "a1")
    decoded: dict[str, Any] = fastavro.schemaless_reader(io.BytesIO(data), PARSED_LANDING, None)
    decoded["common_labels"] = list(decoded["common_labels"].items())
    decoded["keep"] = None
    decoded.update(changes)
    return decoded


def arrow(*records: dict[str, Any]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(list(records), schema=to_arrow_schema(KEPT))


def rows(*records: dict[str, Any]) -> list[dict[str, Any]]:
    return pa.Table.from_batches(list(explode_batches(iter([arrow(*records)])))).to_pylist()


def app(context: str, host: str, value: int) -> SampleBatch:
    bk = Bookkeeper(context, labels={"host": host}, environ={})
    bk.integer("hits", page="home", host="elsewhere").set(value)  # its own host wins
    bk.integer("hits", page="a,b=c {x}").set(value + 1)  # escaped in the key
    bk.double("load").set(value / 2)
    bk.boolean("up").set(True)
    bk.string("version").set(f"v{value}")
    return bk.snapshot()


def test_rows_hold_the_batch_samples_under_their_canonical_keys_sorted() -> None:
    first, second = app("web", "h1", 10), app("api", "h2", 20)
    out = rows(record(first), record(second), record(first, round_ms=ROUND + 60_000))
    expected = sorted(
        (key, ROUND + r * 60_000, sample.value)
        for batch, r in ((first, 0), (second, 0), (first, 1))
        for key, sample in zip(batch.series_keys(), batch.samples(), strict=True)
    )
    observed = [
        (
            row["series"],
            int(row["ts"].timestamp() * 1000),
            row["string_value"]
            if row["type"] == 3
            else (bool(row["value"]) if row["type"] == 2 else row["value"]),
        )
        for row in out
    ]
    assert observed == expected  # in (series, ts) order
    assert {row["date"] + " " + row["hour"] for row in out} == {"2023-11-14 22"}
    assert {row["context"] for row in out} == {"web", "api"}
    assert "hits{context=web,env=default,host=elsewhere,page=home}" in {row["series"] for row in out}
    assert "hits{context=web,env=default,host=h1,page=a%2Cb%3Dc%20%7Bx%7D}" in {row["series"] for row in out}


def test_a_record_without_a_round_takes_each_sample_own_time() -> None:
    batch = app("web", "h1", 10)
    out = rows(record(batch, round_ms=None))
    assert sorted(int(row["ts"].timestamp() * 1000) for row in out) == sorted(batch.timestamps.tolist())
    assert [row["sample_ts_ms"] for row in out] == [int(row["ts"].timestamp() * 1000) for row in out]


def test_the_keep_mask_drops_the_samples_already_written() -> None:
    batch = app("web", "h1", 10)
    keep = np.array([1, 0, 0, 1, 0], dtype=np.uint8)
    out = rows(record(batch, keep=keep.tobytes()), record(batch, round_ms=ROUND + 60_000))
    kept = [key for key, k in zip(batch.series_keys(), keep.tolist(), strict=True) if k]
    assert sorted(row["series"] for row in out if row["ts"].timestamp() * 1000 == ROUND) == sorted(kept)
    assert len(out) == 2 + 5


def test_records_beyond_one_output_batch_come_in_sorted_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(explode, "ROWS_PER_BATCH", 7)
    batches = [app(f"c{i}", "h", i) for i in range(5)]
    out = list(explode_batches(iter([arrow(*(record(batch) for batch in batches))])))
    assert [len(part) for part in out] == [10, 10, 5]  # whole records, two to a batch
    for part in out:
        keys = part.column("series").to_pylist()
        assert keys == sorted(keys)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"values": b"\x00" * 8}, "vectors differ in length"),
        ({"timestamps": b""}, "vectors differ in length"),
        ({"name_ids": np.array([0, 0, 0, 0, 9], dtype="<i4").tobytes()}, "name id out of"),
        ({"label_set_ids": np.array([0, 0, 0, 0, -1], dtype="<i4").tobytes()}, "label set id out of"),
        ({"strings": []}, "string index out of its strings"),
        ({"keep": b"\x01"}, "keep mask is not one byte a sample"),
    ],
)
def test_a_damaged_record_is_refused_by_name(changes: dict[str, Any], message: str) -> None:
    damaged = record(app("web", "h1", 10), **changes)
    with pytest.raises(ValueError, match=message) as caught:
        rows(record(app("ok", "h1", 1)), damaged)
    assert "landing record of web at 1700000000000 from 10.0.0.1:1:u" in str(caught.value)


def test_the_arrow_rows_are_the_spark_samples_schema() -> None:
    assert explode.OUTPUT_SCHEMA.equals(to_arrow_schema(SAMPLES, timezone="UTC"))
