"""A sample read reaches as far back as it asks (issue 32 C): the finest ring where it reaches,
each coarser ring only before it, stitched at the finer ring's oldest kept bucket; the spans
read coarse travel with the answer, in process, over Thrift and through a merge of shards."""

from __future__ import annotations

import time

import numpy as np
import pytest

from bookkeeper import WireError
from vhms import CoarseSpan, VhmsClient, merge_results
from vhms.client import _decode_spans
from vhms.server import Store, VhmsService
from vhms.server.stitch import Piece, RingSpan, stitch

MINUTE = 60_000


def test_the_finest_ring_alone_when_it_reaches_the_start() -> None:
    rings = [RingSpan(5_000, 100, 1539), RingSpan(300_000, -20, 27)]
    assert stitch(rings, 100 * 5_000, 1540 * 5_000) == [Piece(0, 100, 1539)]
    assert stitch(rings, 600_000, 700_000) == [Piece(0, 120, 139)]


def test_coarser_rings_only_before_the_finer_ones_oldest_bucket() -> None:
    # finest: 5 s buckets 1000..2439 (83.33 to 203.25 min); 5 min: 0..40; 15 min: -82..13
    rings = [RingSpan(5_000, 1000, 2439), RingSpan(300_000, 0, 40), RingSpan(900_000, -82, 13)]
    start, end = 10 * MINUTE, 2440 * 5_000
    # the 5 min bucket 16 (80-85 min) straddles the stitch at 83.33 min: left out
    assert stitch(rings, start, end) == [Piece(1, 2, 15), Piece(0, 1000, 2439)]
    # before the 5 min ring's oldest bucket (0 min), the 15 min ring's
    assert stitch(rings, -30 * MINUTE, end) == [Piece(2, -2, -1), Piece(1, 0, 15), Piece(0, 1000, 2439)]
    # a range wholly before the finest ring: the coarser ring alone, to the range's end
    assert stitch(rings, 10 * MINUTE, 40 * MINUTE) == [Piece(1, 2, 7)]
    assert stitch(rings, -900 * MINUTE, -800 * MINUTE) == [Piece(2, -60, -54)]
    # before every ring: the coarsest one's (empty) buckets
    assert stitch(rings, -2000 * MINUTE, -1300 * MINUTE) == [Piece(2, -134, -87)]


def test_an_empty_store_reads_the_finest_grid() -> None:
    rings = [RingSpan(5_000, -1439, -1), RingSpan(300_000, -47, -1)]
    assert stitch(rings, 0, 60_000) == [Piece(0, 0, 11)]


def _store(now_ms: int) -> tuple[Store, np.ndarray]:
    """Two series polled every 5 s for 3 hours (values: the poll's number) into
    ``5s:1440,5m:48``, round by round as an agent writes; and the poll times."""
    store = Store("5s:1440,5m:48")
    polls = now_ms - 5_000 * np.arange(3 * 720)[::-1]
    for number, at in enumerate(polls.tolist()):
        store.ingest(["x{s=a}", "x{s=b}"], np.array([number, -number], dtype=np.float64), np.array([at, at]))
    return store, polls


def test_a_sample_read_is_stitched_per_series_with_its_coarse_span() -> None:
    now = int(time.time()) // 300 * 300 * 1000 - 600_000 + 1_234
    store, polls = _store(now)
    oldest_fine = (now // 5_000 - 1439) * 5_000  # the finest ring's oldest kept bucket
    start = now - 150 * MINUTE
    result = store.fetch("x", start, now + 1, sample_times=True)
    stitch_ms = oldest_fine // 300_000 * 300_000  # the straddling 5 min bucket's start
    first_coarse = start // 300_000 * 300_000
    assert result.coarse_spans == (CoarseSpan(300_000, first_coarse, stitch_ms),)
    assert result.step_ms == 5_000
    coarse = np.arange(first_coarse, stitch_ms, 300_000)
    fine = np.arange(oldest_fine, now // 5_000 * 5_000 + 1, 5_000)
    assert result.timestamps.tolist() == [*coarse.tolist(), *fine.tolist()]
    # a coarse bucket holds its last poll, at the bucket's start; the finest ring each poll
    last_of_bucket = np.searchsorted(polls, coarse + 300_000) - 1
    kept = polls >= oldest_fine
    a = result.values[0] if result.labels["s"][0][result.labels["s"][1][0]] == "a" else result.values[1]
    assert a.tolist() == [
        *last_of_bucket.astype(float).tolist(),
        *np.flatnonzero(kept).astype(float).tolist(),
    ]
    assert result.sample_times is not None
    assert result.sample_times[0].tolist() == [*coarse.tolist(), *polls[kept].tolist()]
    # the finest ring reaches: no coarse span, the answer as before
    near = store.fetch("x", now - 60 * MINUTE, now + 1, sample_times=True)
    assert near.coarse_spans == () and np.diff(near.timestamps).tolist() == [5_000] * 720
    # a bucket read (the DSL's) stays on one ring's even grid
    grid = store.fetch("x", start, now + 1)
    assert grid.step_ms == 300_000 and grid.coarse_spans == ()


def test_spans_travel_over_thrift_and_through_a_merge() -> None:
    now = int(time.time()) // 300 * 300 * 1000 - 600_000 + 1_234
    store, _ = _store(now)
    later, _ = _store(now + 60_000)  # another shard, its finest ring a minute further on
    service = VhmsService(store, shard="s", host="127.0.0.1", port=0, http_port=None, wal=False)
    service.start(None, register=False)
    try:
        with VhmsClient("127.0.0.1", service.port) as client:
            remote = client.fetch("x", now - 150 * MINUTE, now + 1, sample_times=True)
    finally:
        service.stop()
    local = store.fetch("x", now - 150 * MINUTE, now + 1, sample_times=True)
    assert remote.coarse_spans == local.coarse_spans and remote.coarse_spans
    assert np.array_equal(remote.values, local.values, equal_nan=True)
    other = later.fetch('x{s="a"}', now - 150 * MINUTE, now + 1, sample_times=True)
    merged = merge_results([local, other])
    assert merged.timestamps.tolist() == sorted({*local.timestamps.tolist(), *other.timestamps.tolist()})
    assert set(merged.coarse_spans) == {*local.coarse_spans, *other.coarse_spans}
    on_axis = np.full(len(merged.timestamps), np.nan)
    on_axis[np.searchsorted(merged.timestamps, local.timestamps)] = local.values[1]
    assert np.array_equal(merged.values[1], on_axis, equal_nan=True)  # each series on the union axis


def test_coarse_spans_that_are_not_triples_are_refused() -> None:
    with pytest.raises(WireError, match="not triples"):
        _decode_spans(b"\0" * 25, "127.0.0.1:1")
    with pytest.raises(WireError, match="not spans"):
        _decode_spans(np.array([300_000, 10, 5], dtype="<i8").tobytes(), "127.0.0.1:1")
    assert _decode_spans(np.array([300_000, 5, 10], dtype="<i8").tobytes(), "h:1") == (
        CoarseSpan(300_000, 5, 10),
    )
