"""An instant selector reads, at each evaluation time ``t``, each series' latest sample with
its own time in ``[t - 5m, t]``, none if that sample is a stale marker: held against a plain
reading of the samples one by one, over random series (own times anywhere in their buckets,
gaps, stale markers, NaN samples, every bucket filled; read in one block or a series at a
time), evaluation times on and off the buckets' starts, ``offset``, ``@`` and
``timestamp()``; and a selector asked again (its series remembered by the store and its
table by the query side) answers the same as a first time, and sees a new series; rate and
its kin answer the same over untrimmed samples."""

from __future__ import annotations

import struct
import time

import numpy as np
import pytest

from query_dsl.promql import blockwise, instant_query, parse, range_query
from query_dsl.promql.ast import VectorSelector
from query_dsl.promql.instant import _latest_dense
from query_dsl.promql.ranges import VECTORIZED, evaluate_range
from query_dsl.promql.selection import fetch_samples
from query_dsl.promql.values import stored_nan_samples
from vhms import LocalClient
from vhms.server import Store

STALE = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]
GO_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
STEP_MS = 5_000
LOOKBACK_MS = 300_000
BUCKETS = 200


def _series(seed: int, base_ms: int) -> dict[str, list[tuple[int, float]]]:
    """``{key: [(own time ms, value)]}``: series with gaps, stale markers and NaN samples
    (seed 0: every bucket filled, own times at a fixed offset per series, as a scrape's)."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[tuple[int, float]]] = {}
    for series in range(6):
        samples = []
        offset = int(rng.integers(0, STEP_MS))
        for bucket in range(BUCKETS):
            if seed and rng.random() < 0.15:
                continue
            at = base_ms + bucket * STEP_MS + (int(rng.integers(0, STEP_MS)) if seed else offset)
            value = float(rng.integers(0, 1000))
            if seed and rng.random() < 0.03:
                value = STALE
            elif seed and rng.random() < 0.03:
                value = GO_NAN
            samples.append((at, value))
        out[f"x{{s=s{series}}}"] = samples
    return out


def _store(series: dict[str, list[tuple[int, float]]]) -> Store:
    store = Store(f"{STEP_MS // 1000}s:{BUCKETS + 100}")
    keys, values, times = [], [], []
    for key, samples in series.items():
        for at, value in samples:
            keys.append(key)
            values.append(value)
            times.append(at)
    order = np.argsort(times, kind="stable")
    store.ingest([keys[i] for i in order], np.array(values)[order], np.array(times)[order])
    return store


def _expected(samples: list[tuple[int, float]], at_ms: int) -> tuple[int, float] | None:
    """The sample an instant selector reads at ``at_ms``, as Prometheus does."""
    before = [(t, v) for t, v in samples if at_ms - LOOKBACK_MS <= t <= at_ms]
    if not before:
        return None
    t, v = before[-1]
    return None if struct.pack("<d", v) == struct.pack("<d", STALE) else (t, v)


def _same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == b


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize(
    ("first_s", "step_s", "offset_s"),
    [(400, 10, 0), (400.7, 10, 0), (650, 1, 0), (950, 10, 60), (905.3, 7, 300)],
)
@pytest.mark.parametrize("block_cells", [1 << 21, 150])  # every series in one block; a block each
def test_an_instant_selector_reads_the_latest_sample_in_the_lookback(
    seed: int, first_s: float, step_s: float, offset_s: int, block_cells: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blockwise, "_FETCH_BLOCK_CELLS", block_cells)
    base_ms = int(time.time()) // 3600 * 3_600_000 - 3_600_000
    series = _series(seed, base_ms)
    source = LocalClient(_store(series))
    start, end = base_ms / 1000 + first_s, base_ms / 1000 + first_s + 60 * step_s
    text = "x" if not offset_s else f"x offset {offset_s}s"
    for query in (text, f"timestamp({text})"):
        result = range_query(source, query, start, end, step_s)
        got = {labels["s"]: dict(points) for labels, points in result.series()}
        evaluations = np.arange(round(start * 1000), round(end * 1000) + 1, round(step_s * 1000))
        for key, samples in series.items():
            name = key[key.index("=") + 1 : -1]
            for at_ms in evaluations.tolist():
                found = _expected(samples, at_ms - offset_s * 1000)
                value = got.get(name, {}).get(at_ms)
                if found is None:
                    assert value is None, (query, name, at_ms, value)
                    continue
                wanted = found[0] / 1000 if query.startswith("timestamp") else found[1]
                assert value is not None and _same(value, wanted), (query, name, at_ms, value, found)


@pytest.mark.parametrize("seed", [0, 2])
def test_an_instant_query_and_at_modifier_read_the_same_sample(seed: int) -> None:
    base_ms = int(time.time()) // 3600 * 3_600_000 - 3_600_000
    series = _series(seed, base_ms)
    source = LocalClient(_store(series))
    pinned_ms = base_ms + 700_123
    for at_ms in (base_ms + 500_000, base_ms + 612_345, base_ms + 999_999):
        for query, read_ms in (("x", at_ms), (f"x @ {pinned_ms / 1000}", pinned_ms)):
            got = {
                labels["s"]: points for labels, points in instant_query(source, query, at_ms / 1000).series()
            }
            for key, samples in series.items():
                found = _expected(samples, read_ms)
                points = got.get(key[key.index("=") + 1 : -1], [])
                assert (found is None) == (not points), (query, key, at_ms)
                if found is not None:
                    assert _same(points[0][1], found[1])


def test_a_selector_asked_again_answers_the_same_and_sees_a_new_series() -> None:
    base_ms = int(time.time()) // 3600 * 3_600_000 - 3_600_000
    store = _store(_series(1, base_ms))
    source = LocalClient(store)
    start, end = base_ms / 1000 + 400, base_ms / 1000 + 1000
    selector = 'x{s=~"s[0-3]|new"}'
    first = range_query(source, selector, start, end, 10).to_prometheus_body()
    assert range_query(source, selector, start, end, 10).to_prometheus_body() == first
    assert store.stats["selection_cache_hits"] >= 1

    store.ingest(["x{s=s9}"], np.array([7.0]), np.array([base_ms + 990_000]))  # new, not picked
    assert range_query(source, selector, start, end, 10).to_prometheus_body() == first
    store.ingest(["x{s=new}"], np.array([8.0]), np.array([base_ms + 995_000]))  # new, picked
    series = range_query(source, selector, start, end, 10).series()
    assert sorted(labels["s"] for labels, _ in series) == ["new", "s0", "s1", "s2", "s3"]
    new = next(points for labels, points in series if labels["s"] == "new")
    assert new == [(base_ms + 1_000_000, 8.0)]  # the one evaluation time at or after its sample


@pytest.mark.parametrize("seed", [0, 1])
def test_an_instant_selector_reading_what_a_range_selector_read_answers_the_same(seed: int) -> None:
    base_ms = int(time.time()) // 3600 * 3_600_000 - 3_600_000
    source = LocalClient(_store(_series(seed, base_ms)))
    start, end = base_ms / 1000 + 400.5, base_ms / 1000 + 1000.5
    plain = dict(
        (labels["s"], points) for labels, points in range_query(source, "x", start, end, 10).series()
    )
    for query in ("last_over_time(x[5m]) * 0 + x", "x + last_over_time(x[5m]) * 0"):  # both orders
        shared = range_query(source, query, start, end, 10).series()
        assert sorted(labels["s"] for labels, _ in shared) == sorted(plain)
        for labels, points in shared:
            expected = plain[labels["s"]]
            assert [t for t, _ in points] == [t for t, _ in expected], query
            assert all(_same(a, b) for (_, a), (_, b) in zip(points, expected, strict=True)), query


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(VECTORIZED))
@pytest.mark.parametrize(("range_s", "first_s"), [(60, 400), (300, 400.7), (17, 650.2)])
def test_rate_and_its_kin_answer_the_same_over_untrimmed_samples(
    seed: int, name: str, range_s: int, first_s: float
) -> None:
    """``rate`` & co read each window's edges by their samples' own times, so the engine
    gives them the fetch untrimmed (its series then mostly with a sample in every bucket):
    the same bits as over samples trimmed to the windows' span."""
    base_ms = int(time.time()) // 3600 * 3_600_000 - 3_600_000
    source = LocalClient(_store(_series(seed, base_ms)))
    ends = base_ms + round(first_s * 1000) + np.arange(61, dtype=np.int64) * 10_000
    low, high = int(ends[0]) - range_s * 1000, int(ends[-1])
    selector = parse("x")
    assert isinstance(selector, VectorSelector)
    answers = []
    for trim in (True, False):
        samples = fetch_samples(source, selector, low, high, trim=trim)
        samples.values = stored_nan_samples(samples.values)
        values = evaluate_range(name, samples, ends, range_s * 1000, np.zeros((0, len(ends))), lambda: None)
        answers.append(values.view(np.uint64))
    assert np.array_equal(answers[0], answers[1])


@pytest.mark.parametrize("seed", range(6))
def test_the_dense_reading_without_times_picks_what_the_reading_with_times_picks(seed: int) -> None:
    """Series with a sample in every bucket: the rows gathered without comparing any cell
    (no sample times asked) hold what the cell-by-cell reading holds, whether the first
    evaluation time lies in the first bucket, before it, or later, own times anywhere in
    their buckets or at their starts."""
    rng = np.random.default_rng(seed)
    buckets, series = 40, 7
    axis = np.arange(buckets, dtype=np.int64) * STEP_MS + 1_000_000
    values = rng.random((buckets, series))
    own = axis[:, None] + (rng.integers(0, STEP_MS, size=(buckets, series)) if seed % 2 else 0)
    for first in (axis[0] - STEP_MS, axis[0], axis[0] + STEP_MS // 2, axis[3] + 1):
        for lookback in (LOOKBACK_MS, STEP_MS, STEP_MS // 2):
            at = np.arange(first, axis[-1] + 2 * STEP_MS, int(rng.integers(STEP_MS // 3, 2 * STEP_MS)))
            reading = own if seed % 2 else np.broadcast_to(axis[:, None], own.shape)
            fast, _ = _latest_dense(values, reading, axis, at, lookback, with_times=False)
            slow, _ = _latest_dense(values, reading, axis, at, lookback, with_times=True)
            np.testing.assert_array_equal(fast, slow)
            viewed, _ = _latest_dense(values, reading, axis, at, lookback, with_times=False, view=True)
            np.testing.assert_array_equal(viewed, slow)


def test_a_reading_at_the_buckets_step_is_a_view_of_the_samples_when_asked() -> None:
    """Times at consecutive buckets' starts read whole rows that follow each other: with
    ``view`` (a reduction that only reads them) no copy of the samples is made."""
    axis = np.arange(20, dtype=np.int64) * STEP_MS + 1_000_000
    values = np.random.default_rng(0).random((20, 5))
    own = np.broadcast_to(axis[:, None], values.shape)
    at = axis[4:15]
    viewed, _ = _latest_dense(values, own, axis, at, LOOKBACK_MS, with_times=False, view=True)
    copied, _ = _latest_dense(values, own, axis, at, LOOKBACK_MS, with_times=False)
    np.testing.assert_array_equal(viewed, values[4:15])
    np.testing.assert_array_equal(copied, values[4:15])
    assert np.shares_memory(viewed, values) and not np.shares_memory(copied, values)
    every_other = axis[4:15:2]  # not consecutive: gathered
    gathered, _ = _latest_dense(values, own, axis, every_other, LOOKBACK_MS, with_times=False, view=True)
    np.testing.assert_array_equal(gathered, values[4:15:2])
    assert not np.shares_memory(gathered, values)
