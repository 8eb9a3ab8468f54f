"""What a group of landing records remembers (``dedupe.Seen``) and which samples it keeps;
the Spark side (``dedupe_records`` in ``applyInPandasWithState``) is in test_raw_ingest.py."""

from __future__ import annotations

import numpy as np

from bookkeeper.ground import key_hashes as digests
from spark_jobs.dedupe import Seen

A, B, C = digests(["a{}", "b{}", "c{}"])
T = 1_700_000_000_000


def series(*keys: np.uint64) -> np.ndarray:
    return np.array(keys, dtype=np.uint64)


def at(time: int, count: int) -> np.ndarray:
    return np.full(count, time, dtype=np.int64)


def admit_round(seen: Seen, keys: np.ndarray, time: int, watermark: int = 0) -> list[bool]:
    return seen.admit(keys, at(time - 500, len(keys)), time, watermark).tolist()


def test_a_replayed_record_is_dropped_whole() -> None:
    seen = Seen()
    assert admit_round(seen, series(A, B), T) == [True, True]
    assert admit_round(seen, series(A, B), T) == [False, False]
    assert admit_round(seen, series(B, A), T) == [False, False]  # the same series in another order
    assert admit_round(seen, series(A, B), T + 60_000) == [True, True]  # the next round


def test_a_repoll_of_a_round_keeps_only_the_series_it_adds() -> None:
    seen = Seen()
    assert admit_round(seen, series(A, B), T) == [True, True]
    assert admit_round(seen, series(A, B, C), T) == [False, False, True]
    assert admit_round(seen, series(C), T) == [False]
    assert admit_round(seen, series(A, C), T) == [False, False]


def test_a_series_twice_in_one_record_is_kept_once() -> None:
    assert admit_round(Seen(), series(A, B, A), T) == [True, True, False]
    assert Seen().admit(series(A, A, A), np.array([1, 2, 1]), None, 0).tolist() == [True, True, False]


def test_samples_at_or_before_the_watermark_are_late() -> None:
    seen = Seen()
    assert admit_round(seen, series(A), T, watermark=T) == [False]
    assert admit_round(seen, series(A), T, watermark=T - 1) == [True]
    assert seen.admit(series(A, B), np.array([T - 1, T + 1]), None, T).tolist() == [False, True]


def test_samples_without_a_round_are_told_apart_by_their_own_times() -> None:
    seen = Seen()
    assert seen.admit(series(A, B), np.array([T, T + 5]), None, 0).tolist() == [True, True]
    # the next poll: A not updated since (same time), B updated
    assert seen.admit(series(A, B), np.array([T, T + 61_000]), None, 0).tolist() == [False, True]


def test_a_pair_seen_in_a_round_is_a_duplicate_without_one_and_back() -> None:
    seen = Seen()
    assert admit_round(seen, series(A), T) == [True]
    assert seen.admit(series(A, B), at(T, 2), None, 0).tolist() == [False, True]
    assert admit_round(seen, series(B, C), T) == [False, True]


def test_rounds_of_the_same_series_share_one_shape_in_the_state() -> None:
    seen = Seen()
    many = digests([f"s{i}{{}}" for i in range(1500)])
    for r in range(10):
        admit_round(seen, many, T + r * 60_000)
    times, shape_of, lengths, shapes, pairs, pair_times = seen.dump()
    assert len(shapes) == 1500 * 8 and np.frombuffer(lengths, dtype="<i4").tolist() == [1500]
    assert len(times) == 10 * 8 and np.frombuffer(shape_of, dtype="<i4").tolist() == [0] * 10
    assert pairs == b"" and pair_times == b""


def test_the_state_remembers_across_micro_batches_and_forgets_what_the_watermark_passed() -> None:
    seen = Seen()
    admit_round(seen, series(A, B), T)
    admit_round(seen, series(C), T + 60_000)
    seen.admit(series(A), np.array([T + 1]), None, 0)
    restored = Seen.load(seen.dump())
    assert admit_round(restored, series(A, B), T) == [False, False]
    assert restored.admit(series(A, B), np.array([T + 1, T + 1]), None, 0).tolist() == [False, True]
    assert restored.latest == T + 60_000

    restored.forget(T + 1)  # the round at T and the pairs at T + 1 are past
    assert len(restored.shapes) == 1 and list(restored.rounds) == [T + 60_000]
    assert len(restored.pairs) == 0
    assert admit_round(restored, series(C), T + 60_000, watermark=T + 1) == [False]
    restored.forget(T + 60_000)
    assert restored.latest is None and Seen.load(restored.dump()).latest is None
