"""analyze and backfill_vhms against the query language and VHMS on the same data."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hdfs_history import new_history

from artimon.servers import SparkCluster
from bookkeeper import Bookkeeper
from bookkeeper.ground import LandingWriter, decode_sample_batch, encode_sample_batch, encode_trailer
from query_dsl import Evaluator, Matrix
from spark_jobs import analyze, backfill_vhms, raw_ingest
from vhms import HashRing, LocalClient, ShardedClient
from vhms.server import Store, VhmsService

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROUND = 1_700_000_040_000 // 60_000 * 60_000
MINUTES = 12


@pytest.fixture(scope="module")
def history(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> tuple[str, Store]:
    """The same rounds landed and turned into Parquet (on the session's HDFS), and ingested
    into a VHMS store."""
    work = tmp_path_factory.mktemp("history")
    landing = work / "landing"
    landing.mkdir()
    store = Store()
    writer = LandingWriter(landing / "rounds.avro")
    rng = np.random.default_rng(2)
    counters = {(p, h): 0 for p in ("home", "cart") for h in ("h1", "h2", "h3")}
    for minute in range(MINUTES):
        round_ms = ROUND + minute * 60_000
        records = []
        for host in ("h1", "h2", "h3"):
            bk = Bookkeeper(f"web-{host}", labels={"host": host}, environ={})
            for page in ("home", "cart"):
                counters[(page, host)] += int(rng.integers(0, 100))
                if minute == 7 and host == "h2":
                    counters[(page, host)] = 3  # a restart: the counter resets
                bk.integer("hits", page=page).set(counters[(page, host)])
            bk.double("load").set(float(rng.random()))
            bk.string("version").set(f"v{minute // 5}")
            body = encode_sample_batch(bk.snapshot())
            records.append(body + encode_trailer(round_ms, f"{host}:1:u", "a1"))
            store.ingest_batch(decode_sample_batch(body), timestamp_ms=round_ms)
        writer.write_block(records)
    writer.close()
    root = new_history(request, work)
    raw_ingest.ingest_once(spark, str(landing), root.uri("parquet"), root.uri("checkpoint"))
    return root.uri("parquet"), store


QUERIES = [
    'fetch("hits")',
    'fetch("hits{page=home}") | map(increase, 5m)',
    'fetch("hits") | map(rate, 3m) | reduce(sum, by=[page])',
    'fetch("load") | reduce(mean, by=[host])',
    'fetch("hits{page=cart}") - ignoring(page) fetch("hits{page=home}")',
    'fetch("hits") | map(delta, 4m) | reduce(max) | bucketize(4m, max)',
    'fetch("hits") | reduce(percentile, 90, without=[host])',
    'fetch("~.*") | reduce(count, by=[host])',
    'fetch("hits") | map(fill_previous) | filter("hits{host~h[12]}") | reduce(median, by=[host])',
    'fetch("load") | where_last(">", 0.3) | reduce(stddev)',
    'fetch("hits") | bucketize(3m, last) | reduce(first, by=[page])',
    'fetch("hits") | reduce(last, by=[page]) - fetch("hits") | reduce(mean, by=[page])',
    'fetch("~.*")',
]


@pytest.mark.parametrize("query", QUERIES)
def test_analyze_agrees_with_the_query_language(spark: Any, history: tuple[str, Store], query: str) -> None:
    path, store = history
    start, end = ROUND, ROUND + MINUTES * 60_000
    over_parquet = analyze.analyze(spark, path, query, start, end)
    over_vhms = Evaluator(LocalClient(store), start_ms=start, end_ms=end).evaluate(query)
    assert isinstance(over_parquet, Matrix) and isinstance(over_vhms, Matrix)
    parquet_order, vhms_order = np.argsort(over_parquet.series_keys()), np.argsort(over_vhms.series_keys())
    assert sorted(over_parquet.series_keys()) == sorted(over_vhms.series_keys())
    np.testing.assert_array_equal(over_parquet.timestamps, over_vhms.timestamps)
    np.testing.assert_allclose(
        over_parquet.values[parquet_order], over_vhms.values[vhms_order], equal_nan=True
    )
    assert np.isfinite(over_vhms.values).any()  # the comparison compared something


def test_analyze_writes_csv_and_says_what_it_wrote_and_why_values_are_empty(
    spark: Any, history: tuple[str, Store], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = history
    args = argparse.Namespace(
        input=path,
        query='fetch("hits") | reduce(sum, by=[page])',
        start=str(ROUND),
        end=str(ROUND + MINUTES * 60_000),
        step=60,
        output=str(tmp_path / "out"),
        format="csv",
    )
    assert analyze.run_query(spark, args) == 0
    (csv,) = (tmp_path / "out").glob("part-*.csv")
    frame = pd.read_csv(csv)
    assert list(frame.columns) == ["series", "ts_ms", "value"] and len(frame) == 2 * MINUTES
    said = capsys.readouterr()
    values = int(frame["value"].notna().sum())
    assert said.out == f"wrote {2 * MINUTES} rows (2 series, {values} values) to {args.output}\n"
    assert said.err == "" and values > 0
    args.query = 'fetch("hits") | map(rate, 1m) | reduce(sum, by=[page])'  # one bucket per window
    assert analyze.run_query(spark, args) == 0
    said = capsys.readouterr()
    assert said.err.startswith("warning: every value of the answer is empty")
    assert said.out.endswith(", 0 values) to " + args.output + "\n")


def test_a_backfill_puts_each_series_on_the_shard_the_ring_names_and_answers_as_the_original(
    spark: Any, history: tuple[str, Store]
) -> None:
    path, original = history
    shards = {name: VhmsService(Store(), shard=name, http_port=None) for name in ("a", "b")}
    for service in shards.values():
        service.start(register=False)
    try:
        servers = {name: [(s.host, s.port)] for name, s in shards.items()}
        with ShardedClient(servers=servers) as client:
            sent = backfill_vhms.backfill(spark, path, ROUND, ROUND + MINUTES * 60_000, client, chunk=50)
            assert sent == MINUTES * 3 * 4
            ring = HashRing(["a", "b"])
            placed = {name: set(s.store.series_keys("{}")) for name, s in shards.items()}
            assert placed["a"] and placed["b"] and not placed["a"] & placed["b"]  # both hold a share
            for name, keys in placed.items():
                assert {ring.shard_of(key) for key in keys} == {name}
            for selector in ("hits", "load", "hits{host=h2}"):
                for resolution in (60, 300):
                    a = original.fetch(selector, ROUND, ROUND + MINUTES * 60_000, resolution)
                    b = client.fetch(selector, ROUND, ROUND + MINUTES * 60_000, resolution)
                    assert sorted(a.keys) == sorted(b.keys) and a.keys
                    np.testing.assert_array_equal(a.values[np.argsort(a.keys)], b.values[np.argsort(b.keys)])
        strings: dict[str, tuple[int, str]] = {}
        for service in shards.values():
            strings.update(service.store.last_strings("version"))
        assert strings == original.last_strings("version")
    finally:
        for service in shards.values():
            service.stop()


def test_analyze_on_a_cluster_agrees_with_the_query_language(
    spark_cluster: SparkCluster, history: tuple[str, Store], tmp_path: Path
) -> None:
    """``artimon spark --master spark://...`` analyze: executors in their own JVM and Python
    workers, the answer written by the command."""
    path, store = history
    query = 'fetch("hits") | map(rate, 3m) | reduce(sum, by=[page])'
    start, end = ROUND, ROUND + MINUTES * 60_000
    command = [sys.executable, "-m", "artimon", "spark", "--master", spark_cluster.master_url]
    command += ["--conf", "spark.executor.memory=512m", "analyze", "--input", path, "--query", query]
    command += [
        "--start",
        str(start),
        "--end",
        str(end),
        "--output",
        str(tmp_path / "out"),
        "--format",
        "csv",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    frame = pd.concat(pd.read_csv(csv) for csv in (tmp_path / "out").glob("part-*.csv"))
    on_cluster = frame.pivot(index="series", columns="ts_ms", values="value").sort_index()
    over_vhms = Evaluator(LocalClient(store), start_ms=start, end_ms=end).evaluate(query)
    assert isinstance(over_vhms, Matrix)
    order = np.argsort(over_vhms.series_keys())
    assert on_cluster.index.tolist() == sorted(over_vhms.series_keys())
    assert on_cluster.columns.tolist() == over_vhms.timestamps.tolist()
    np.testing.assert_allclose(on_cluster.to_numpy(), over_vhms.values[order], equal_nan=True)
    assert np.isfinite(over_vhms.values).any()
