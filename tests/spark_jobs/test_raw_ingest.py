from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hdfs_history import History
from prometheus_client.parser import text_string_to_metric_families

from artimon.servers import free_port
from bookkeeper import Bookkeeper
from bookkeeper.batch import Sample, SampleBatch
from bookkeeper.ground import LandingWriter, encode_sample_batch, encode_trailer
from bookkeeper.vartype import VarType
from spark_jobs import raw_ingest

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROUND = 1_700_000_000_000


def land(path: Path, rounds: range, contexts: int = 3) -> list[tuple[str, int, object]]:
    """Write a landing file; returns the (series, round, value) it holds."""
    expected = []
    writer = LandingWriter(path)
    for r in rounds:
        records = []
        for c in range(contexts):
            bk = Bookkeeper(f"app{c}", environ={})
            bk.integer("hits", page="home").set(r * 10 + c)
            bk.double("load").set(r + c / 10)
            bk.string("version").set(f"v{r}")
            batch = bk.snapshot()
            records.append(
                encode_sample_batch(batch) + encode_trailer(ROUND + r * 60_000, f"10.0.0.{c}:1:u", "a1")
            )
            for key, sample in zip(batch.series_keys(), batch.samples(), strict=True):
                expected.append((key, ROUND + r * 60_000, sample.value))
        writer.write_block(records)
    writer.close()
    return expected


def run_once(spark: Any, landing: Path, root: History, name: str = "out") -> pd.DataFrame:
    """``raw_ingest --once`` into ``<root>/<name>``; the Parquet it holds then."""
    raw_ingest.ingest_once(spark, str(landing), root.uri(f"{name}/parquet"), root.uri(f"{name}/checkpoint"))
    return root.read(spark, f"{name}/parquet")


def observed(frame: pd.DataFrame) -> list[tuple[str, int, object]]:
    rows = []
    for row in frame.itertuples():
        value: object = (
            row.string_value if row.type == 3 else (bool(row.value) if row.type == 2 else row.value)
        )
        if row.type == 0:
            value = int(row.value)
        rows.append((row.series, int(pd.Timestamp(row.ts).value // 1_000_000), value))
    return rows


def test_landing_to_parquet_equals_the_input(spark: Any, tmp_path: Path, history_root: History) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    expected = land(landing / "a.avro", range(0, 3)) + land(landing / "b.avro", range(3, 5))
    (landing / "c.avro.tmp").write_bytes(b"being written: never read")
    frame = run_once(spark, landing, history_root)
    assert sorted(observed(frame), key=repr) == sorted(expected, key=repr)
    dates = [d for d in history_root.children(spark, "out/parquet") if d.startswith("date=")]
    partitions = [f"{d}/{h}" for d in dates for h in history_root.children(spark, f"out/parquet/{d}")]
    assert partitions == ["date=2023-11-14/hour=22"]
    assert set(frame.columns) >= {"series", "type", "value", "string_value", "ts", "sample_ts_ms", "context"}


def test_a_replayed_landing_file_adds_no_duplicate(spark: Any, tmp_path: Path, history_root: History) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    expected = land(landing / "a.avro", range(0, 2))
    shutil.copy(landing / "a.avro", landing / "a-replayed-by-the-agent.avro")
    frame = run_once(spark, landing, history_root)
    assert len(frame) == len(expected)
    assert sorted(observed(frame), key=repr) == sorted(expected, key=repr)


def test_a_restart_continues_from_the_checkpoint_exactly_once(
    spark: Any, tmp_path: Path, history_root: History
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    first = land(landing / "a.avro", range(0, 2))
    assert len(run_once(spark, landing, history_root)) == len(first)
    second = land(landing / "b.avro", range(2, 4))
    shutil.copy(landing / "a.avro", landing / "a-again.avro")  # and a replay of the first
    frame = run_once(spark, landing, history_root)  # the same checkpoint: a restart
    assert sorted(observed(frame), key=repr) == sorted(first + second, key=repr)


def test_a_job_killed_mid_stream_and_restarted_gives_the_uninterrupted_output(
    spark: Any, tmp_path: Path, history_root: History
) -> None:
    import os
    import signal
    import subprocess
    import sys

    landing = tmp_path / "landing"
    landing.mkdir()
    expected = []
    for n in range(6):
        expected += land(landing / f"f{n}.avro", range(n * 2, n * 2 + 2))
    metrics_port = free_port()
    command = [
        sys.executable,
        "-m",
        "artimon",
        "spark",
        "--master",
        "local[2]",
        "--metrics-port",
        str(metrics_port),
        "raw_ingest",
        "--landing",
        str(landing),
        "--output",
        history_root.uri("killed/parquet"),
        "--checkpoint",
        history_root.uri("killed/checkpoint"),
        "--max-files",
        "1",
        "--interval",
        "1 second",
    ]
    job = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 180
        while len([n for n in history_root.children(spark, "killed/checkpoint/commits") if n.isdigit()]) < 2:
            assert job.poll() is None, "the streaming job ended by itself"
            assert time.monotonic() < deadline, "no micro-batch committed"
            time.sleep(0.2)
        exposed = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text  # while it runs
        families = {f.name: f.samples[0].value for f in text_string_to_metric_families(exposed) if f.samples}
        assert (
            0 <= families["artimon_raw_ingest_landing_files"] <= 6
            and families["process_resident_memory_bytes"] > 0
        )
        os.killpg(job.pid, signal.SIGKILL)  # mid-stream: more files wait, a batch may be half written
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    restarted = run_once(spark, landing, history_root, "killed")
    uninterrupted = run_once(spark, landing, history_root, "clean")
    assert sorted(observed(restarted), key=repr) == sorted(observed(uninterrupted), key=repr)
    assert sorted(observed(restarted), key=repr) == sorted(expected, key=repr)


def test_a_truncated_landing_file_keeps_its_whole_blocks_and_the_stream_goes_on(
    spark: Any, tmp_path: Path, history_root: History
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    whole = land(landing / "a.avro", range(0, 2))
    damaged = land(landing / "t.avro", range(2, 5))  # three blocks, one per round
    data = (landing / "t.avro").read_bytes()
    (landing / "t.avro").write_bytes(data[:-40])  # into the last block
    frame = run_once(spark, landing, history_root)
    kept = [row for row in damaged if row[1] < ROUND + 4 * 60_000]
    assert sorted(observed(frame), key=repr) == sorted(whole + kept, key=repr)


def land_batches(path: Path, batches: list[tuple[SampleBatch, int | None]]) -> None:
    writer = LandingWriter(path)
    writer.write_block([encode_sample_batch(b) + encode_trailer(r, "10.0.0.9:1:u", "a1") for b, r in batches])
    writer.close()


def counters(context: str, values: dict[str, tuple[int, int]]) -> SampleBatch:
    """A batch of INTEGER variables: name -> (value, the app's timestamp)."""
    samples = [Sample(name, {}, VarType.INTEGER, v, ms) for name, (v, ms) in values.items()]
    return SampleBatch.from_samples(context, samples, {"context": context, "host": "h1"})


def test_a_repoll_of_a_round_keeps_the_first_values_and_adds_the_new_variables(
    spark: Any, tmp_path: Path, history_root: History
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    land_batches(
        landing / "a.avro", [(counters("web", {"hits": (1, ROUND - 5), "errors": (2, ROUND - 5)}), ROUND)]
    )
    run_once(spark, landing, history_root)
    # the agent restarted within the round and polled the app again: new values, a new variable
    repoll = counters("web", {"hits": (10, ROUND + 7), "errors": (20, ROUND + 7), "slow": (30, ROUND + 7)})
    land_batches(
        landing / "b.avro",
        [(repoll, ROUND), (counters("web", {"hits": (11, ROUND + 60_000)}), ROUND + 60_000)],
    )
    frame = run_once(spark, landing, history_root)
    assert sorted(observed(frame)) == [
        ("errors{context=web,host=h1}", ROUND, 2),
        ("hits{context=web,host=h1}", ROUND, 1),
        ("hits{context=web,host=h1}", ROUND + 60_000, 11),
        ("slow{context=web,host=h1}", ROUND, 30),
    ]


def test_samples_without_a_round_are_deduplicated_by_their_own_times(
    spark: Any, tmp_path: Path, history_root: History
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    first = counters("batch-job", {"done": (5, ROUND + 1_000), "queued": (7, ROUND + 2_000)})
    # the next poll: "done" was not updated since (same value, same time); "queued" was
    second = counters("batch-job", {"done": (5, ROUND + 1_000), "queued": (8, ROUND + 61_000)})
    land_batches(landing / "a.avro", [(first, None), (second, None), (second, None)])
    frame = run_once(spark, landing, history_root)
    assert sorted(observed(frame)) == [
        ("done{context=batch-job,host=h1}", ROUND + 1_000, 5),
        ("queued{context=batch-job,host=h1}", ROUND + 2_000, 7),
        ("queued{context=batch-job,host=h1}", ROUND + 61_000, 8),
    ]


def test_records_the_watermark_has_passed_are_dropped_as_late(
    spark: Any, tmp_path: Path, history_root: History
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    day = 24 * 3_600_000
    land_batches(landing / "a.avro", [(counters("web", {"hits": (1, ROUND + day)}), ROUND + day)])
    run_once(spark, landing, history_root)  # the watermark moves to a day later less 15 minutes
    land_batches(landing / "b.avro", [(counters("web", {"hits": (2, ROUND)}), ROUND)])
    land_batches(
        landing / "c.avro", [(counters("api", {"hits": (3, ROUND + day - 60_000)}), ROUND + day - 60_000)]
    )
    frame = run_once(spark, landing, history_root)
    assert sorted(observed(frame)) == [
        ("hits{context=api,host=h1}", ROUND + day - 60_000, 3),
        ("hits{context=web,host=h1}", ROUND + day, 1),
    ]


def test_the_parquet_files_are_sorted_by_series_and_time_with_delta_encoded_keys(
    spark: Any, tmp_path: Path, history_root: History
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    land(landing / "a.avro", range(0, 3), contexts=5)
    run_once(spark, landing, history_root)
    local = history_root.copy_to_local(spark, "out/parquet", tmp_path / "copy")
    files = sorted(local.rglob("*.parquet"))
    assert files
    for file in files:
        rows = pq.read_table(file, columns=["series", "ts"]).to_pylist()
        assert rows == sorted(rows, key=lambda row: (row["series"], row["ts"]))
        metadata = pq.ParquetFile(file).metadata
        series = next(
            metadata.row_group(0).column(c)
            for c in range(metadata.num_columns)
            if metadata.row_group(0).column(c).path_in_schema == "series"
        )
        assert "DELTA_BYTE_ARRAY" in series.encodings and series.compression == "ZSTD"
