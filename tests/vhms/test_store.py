from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from bookkeeper import Bookkeeper
from vhms import FetchLimitError, ResolutionError, SeriesLimitError, parse_resolutions
from vhms.server import Store, load_snapshot, save_snapshot
from vhms.server.store import CHUNK

MINUTE = 60_000
NOW = int(time.time() * 1000) // (60 * MINUTE) * (60 * MINUTE)  # an hour boundary in the past


def keys(n: int, name: str = "cpu") -> list[str]:
    return [f"{name}{{dc=jb,host=h{i}}}" for i in range(n)]


def ingest_minutes(store: Store, series: list[str], minutes: range, base: int = NOW - 600 * MINUTE) -> None:
    for m in minutes:
        store.ingest(series, np.arange(len(series)) + m * 100.0, np.full(len(series), base + m * MINUTE))


def test_resolutions_parse_and_refuse_clearly() -> None:
    assert [str(r) for r in parse_resolutions()] == [
        "60s:60:last",
        "300s:48:last",
        "900s:96:last",
        "3600s:72:last",
    ]
    assert parse_resolutions("1h:24:max,10s:6")[1].aggregate == "max"
    assert parse_resolutions("90s:4,1h30m:2")[1].step_s == 5400  # steps are durations
    for bad, why in [
        ("5x:3", "is not <step>"),
        ("1500ms:4", "whole seconds"),
        ("60s:60:median", "aggregate 'median'"),
        ("60s:60:max,5m:4", "finest resolution"),
        ("60s:60,90s:10", "not a larger multiple"),
    ]:
        with pytest.raises(ResolutionError, match=why):
            parse_resolutions(bad)


def test_ring_wraps_around_and_forgets_what_it_recycled() -> None:
    store = Store("60s:5,300s:4")
    series = keys(2)
    ingest_minutes(store, series, range(12))
    end = NOW - 600 * MINUTE + 12 * MINUTE
    fine = store.fetch("cpu", end - 12 * MINUTE, end, resolution=60)
    assert np.isnan(fine.values[:, :7]).all()  # only the last 5 minutes remain
    assert fine.values[0, 7:].tolist() == [700.0, 800.0, 900.0, 1000.0, 1100.0]
    coarse = store.fetch("cpu", end - 20 * MINUTE, end, resolution=300)
    assert coarse.values[0].tolist()[-3:] == [400.0, 900.0, 1100.0]  # last of each 5 minutes


def test_fetch_reads_any_ids_across_chunks_and_the_wrap_of_the_ring() -> None:
    """Fetch copies blocks (slices where ids or slots run on) out of time-major chunks: every
    cell must be the one ingested, for ids spread over two chunks, runs and gaps of ids,
    windows across the ring's wrap and beyond what it keeps."""
    count = CHUNK + 500
    series = [f"m{{g={i % 3},i={i}}}" for i in range(count)]
    store = Store("60s:7", max_series=count, max_series_per_query=count)
    base = NOW - 600 * MINUTE
    for m in range(11):  # 11 minutes into 7 slots: the ring wraps
        store.ingest(series, np.arange(count) * 100.0 + m, np.full(count, base + m * MINUTE))
    for selector in ("m", "m{g=1}", "m{g!=2}", "m{i~6553[0-9]|6554[0-9]|1}"):
        result = store.fetch(selector, base, base + 12 * MINUTE, resolution=60)
        ids = np.array([int(key.rsplit("=", 1)[1][:-1]) for key in result.keys])
        minutes = np.arange(12)
        expected = ids[:, None] * 100.0 + minutes[None, :]
        expected[:, (minutes < 4) | (minutes > 10)] = np.nan  # recycled, and not yet come
        np.testing.assert_array_equal(result.values, expected)


def test_late_samples_land_in_their_buckets() -> None:
    store = Store()
    series = keys(3)
    ingest_minutes(store, series, range(10, 20))
    ingest_minutes(store, series, range(0, 10))  # the backlog after a partition heals
    base = NOW - 600 * MINUTE
    result = store.fetch("cpu{host=h1}", base, base + 20 * MINUTE, resolution=60)
    assert result.values[0].tolist() == [1.0 + m * 100 for m in range(20)]
    five = store.fetch("cpu{host=h1}", base, base + 20 * MINUTE, resolution=300)
    assert five.values[0].tolist() == [401.0, 901.0, 1401.0, 1901.0]


def test_samples_older_than_every_ring_are_counted_and_dropped() -> None:
    store = Store("60s:10,300s:4")
    series = keys(1)
    ingest_minutes(store, series, range(100, 101))
    assert store.ingest(series, np.array([1.0]), np.array([NOW - 600 * MINUTE])) == 0
    assert store.stats["samples_too_old"] == 1


def test_replays_are_idempotent_and_the_newest_sample_of_a_bucket_wins() -> None:
    store = Store("60s:60,300s:12:sum,900s:8:mean")
    series = keys(2)
    ingest_minutes(store, series, range(15))
    base = NOW - 600 * MINUTE
    before = [store.fetch("cpu", base, base + 15 * MINUTE, resolution=r).values for r in (60, 300, 900)]
    ingest_minutes(store, series, range(15))  # the same samples again
    ingest_minutes(store, series, range(3, 9))
    after = [store.fetch("cpu", base, base + 15 * MINUTE, resolution=r).values for r in (60, 300, 900)]
    for a, b in zip(before, after, strict=True):
        assert np.array_equal(a, b, equal_nan=True)
    assert after[1][0].tolist() == [sum(m * 100.0 for m in range(k, k + 5)) for k in (0, 5, 10)]
    # within one bucket, an older sample arriving after a newer one does not replace it
    store.ingest(series[:1], np.array([-1.0]), np.array([base + 5 * MINUTE + 50_000]))
    store.ingest(series[:1], np.array([-2.0]), np.array([base + 5 * MINUTE + 10_000]))
    assert store.fetch("cpu{host=h0}", base + 5 * MINUTE, base + 6 * MINUTE).values[0, 0] == -1.0


def test_of_the_samples_of_one_bucket_in_one_batch_the_latest_stays() -> None:
    store = Store("60s:10,300s:12")
    base = NOW - 600 * MINUTE
    times = np.array([base + 50_000, base + 10_000, base + 30_000, base + 50_000 - 1])
    store.ingest(["x{}"] * 4, np.array([1.0, 2.0, 3.0, 4.0]), times)
    assert store.fetch("x", base, base + MINUTE, resolution=60).values[0, 0] == 1.0
    assert store.fetch("x", base, base + 5 * MINUTE, resolution=300).values[0, 0] == 1.0


@pytest.mark.parametrize(("aggregate", "expected"), [("last", 5.0), ("min", 1.0), ("max", 9.0)])
def test_old_samples_of_one_coarse_bucket_in_one_batch_all_count(aggregate: str, expected: float) -> None:
    """Samples behind the finest ring merge into a coarse bucket: several of them for the same
    series and bucket in one batch (a backlog) each take part, not only one of them."""
    store = Store(f"60s:10,300s:12:{aggregate}")
    base = NOW - 600 * MINUTE
    store.ingest(["x{}"], np.array([0.0]), np.array([base + 40 * MINUTE]))  # the finest ring moves on
    minutes = [0, 4, 1, 3, 2]  # out of order on purpose; the 5-minute bucket [0, 5) of each series
    values = np.array([2.0, 5.0, 9.0, 1.0, 3.0])
    for series in (["x{}"] * 5, ["x{}", "y{}", "x{}", "x{}", "x{}"]):
        store.ingest(series, values, np.array([base + m * MINUTE for m in minutes]))
        assert store.fetch("x", base, base + 5 * MINUTE, resolution=300).values[0, 0] == expected
    assert store.fetch("y", base, base + 5 * MINUTE, resolution=300).values[0, 0] == 5.0


@pytest.mark.parametrize(
    ("aggregate", "expected"),
    [("last", 4.0), ("min", 0.0), ("max", 4.0), ("sum", 10.0), ("count", 5.0), ("mean", 2.0)],
)
def test_each_aggregate_over_the_finest_buckets(aggregate: str, expected: float) -> None:
    store = Store(f"60s:60,300s:12:{aggregate}")
    base = NOW - 600 * MINUTE
    for m in [4, 0, 3, 1, 2]:  # out of order on purpose
        store.ingest(["x{}"], np.array([float(m)]), np.array([base + m * MINUTE]))
    assert store.fetch("x", base, base + 5 * MINUTE, resolution=300).values[0, 0] == expected


def test_auto_resolution_is_the_finest_that_covers_the_range() -> None:
    store = Store()
    ingest_minutes(store, keys(1), range(600))
    end = NOW - 600 * MINUTE + 600 * MINUTE
    assert store.fetch("cpu", end - 30 * MINUTE, end).step_ms == 60_000
    assert store.fetch("cpu", end - 3 * 60 * MINUTE, end).step_ms == 300_000
    assert store.fetch("cpu", end - 9 * 60 * MINUTE, end).step_ms == 900_000
    assert store.fetch("cpu", end - 48 * 60 * MINUTE, end).step_ms == 3_600_000


def test_last_hour_reads_the_sixty_one_minute_buckets_of_a_sixty_minute_ring() -> None:
    """``last=1h`` at any instant of a minute asks for buckets starting in (now - 1h, now]:
    the 60 x 1 min ring holds all of them, so they are 1-minute buckets, not 5-minute ones."""
    store = Store()
    ingest_minutes(store, keys(1), range(120))
    head = NOW - 600 * MINUTE + 119 * MINUTE
    for into_the_minute in (1, 30_000, MINUTE - 1):  # (on the minute itself, 61 buckets would be)
        now = head + into_the_minute
        result = store.fetch("cpu", now - 60 * MINUTE, now + 1)
        assert result.step_ms == MINUTE and len(result.timestamps) == 60
        assert not np.isnan(result.values).any()


def test_booleans_as_numbers_and_strings_as_last_values() -> None:
    bk = Bookkeeper("app", environ={})
    bk.boolean("up").set(True)
    bk.integer("hits", page="a").set(5)
    bk.string("version").set("1.0")
    store = Store()
    stored = store.ingest_batch(bk.snapshot(), timestamp_ms=NOW)
    assert stored == 2
    assert store.fetch("up", NOW, NOW + MINUTE).values[0, 0] == 1.0
    assert store.fetch("hits{page=a}", NOW, NOW + MINUTE).values[0, 0] == 5.0
    bk.string("version").set("1.1")
    store.ingest_batch(bk.snapshot(), timestamp_ms=NOW + MINUTE)
    ((key, (ts, text)),) = store.last_strings("version").items()
    assert key.startswith("version{context=app") and (ts, text) == (NOW + MINUTE, "1.1")


def test_limits_are_clear_errors() -> None:
    store = Store(max_series=3, max_series_per_query=2, max_points_per_query=100)
    store.ingest(keys(5), np.ones(5), np.full(5, NOW))
    assert store.series == 3 and store.stats["series_refused"] == 2
    with pytest.raises(SeriesLimitError, match="max_series=3"):
        store.index.require("new{}")
    with pytest.raises(FetchLimitError, match="3 series, more than max_series_per_query=2"):
        store.fetch("cpu", NOW, NOW + MINUTE)
    with pytest.raises(FetchLimitError, match="points, more than max_points_per_query=100"):
        store.fetch("cpu{host=h0}", NOW - 200 * MINUTE, NOW, resolution=60)
    # a range of millennia is refused before its time axis exists, with series or without
    for selector in ("cpu{host=h0}", "nothing"):
        with pytest.raises(FetchLimitError, match="buckets = "):
            Store().fetch(selector, 0, 2**53)


def test_samples_from_a_wild_clock_are_refused() -> None:
    store = Store()
    future = int(time.time() * 1000) + 3600 * 1000
    assert store.ingest(["x{}"], np.array([1.0]), np.array([future])) == 0
    assert store.stats["samples_from_the_future"] == 1
    assert store.rings[0].head == -1  # the ring did not jump forward


def test_a_small_store_pays_for_its_series_not_for_a_whole_chunk() -> None:
    """Rings grow their columns with the series: a store of 150 series in 3,600 one-second
    buckets holds arrays for about a thousand columns, not 65,536 (1.9 GB); growing keeps
    every value, across the first chunk's end too."""
    store = Store("1s:3600,5m:48", max_series=CHUNK + 10, max_series_per_query=CHUNK + 10)
    first = [f"m{{i={i}}}" for i in range(150)]
    store.ingest(first, np.arange(150.0), np.full(150, NOW))
    plain = [ring.plain for ring in store.rings]
    assert sum(chunk.nbytes for ring in plain for chunk in ring.values) < 40 * 2**20
    more = [f"m{{i={i}}}" for i in range(150, CHUNK + 5)]  # past the first chunk
    store.ingest(more, np.arange(150.0, CHUNK + 5), np.full(len(more), NOW))
    result = store.fetch("m", NOW, NOW + 1000, resolution=1)
    by_key = dict(zip(result.keys, result.values[:, 0].tolist(), strict=True))
    assert len(by_key) == CHUNK + 5 and all(
        by_key[f"m{{i={i}}}"] == float(i) for i in range(0, CHUNK + 5, 997)
    )


def test_rows_written_before_a_growth_or_a_snapshot_are_kept_and_later_recycled(tmp_path: Path) -> None:
    """The rings keep an empty bucket as zero bits in memory the kernel hands out on first
    write, and clear only the rows written since their last clear: a row written, then
    carried over by a growth of its chunk or by a snapshot, must still be read and still be
    cleared when the ring comes round to it."""
    store = Store("60s:5", max_series=3000, max_series_per_query=3000)
    store.ingest(keys(10), np.arange(10.0), np.full(10, NOW))
    store.ingest(keys(2000), np.arange(2000.0) + 0.5, np.full(2000, NOW + MINUTE))  # grows the chunk
    result = store.fetch("cpu", NOW, NOW + 2 * MINUTE, resolution=60)
    first = dict(zip(result.keys, result.values[:, 0].tolist(), strict=True))
    assert [first[k] for k in keys(10)] == list(map(float, range(10)))
    assert np.isnan([first[k] for k in keys(2000)[10:]]).all()
    save_snapshot(store, tmp_path)
    restored = Store("60s:5", max_series=3000, max_series_per_query=3000)
    assert load_snapshot(restored, tmp_path)
    for each in (store, restored):
        each.ingest(keys(1), np.array([7.0]), np.array([NOW + 5 * MINUTE]))  # recycles NOW's slot
        again = each.fetch("cpu", NOW + MINUTE, NOW + 6 * MINUTE, resolution=60)
        assert np.isnan(again.values[:, -1][1:]).all()  # NOW's old values are gone from the slot
        assert again.values[0, -1] == 7.0 and again.values[5, 0] == 5.5
