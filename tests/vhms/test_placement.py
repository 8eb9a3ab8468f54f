"""Placement of series on shards by consistent hashing."""

from __future__ import annotations

from vhms import HashRing


def test_consistent_hashing_moves_only_the_series_of_a_changed_shard() -> None:
    keys = [f"k{{i={i}}}" for i in range(5000)]
    two = HashRing(["a", "b"])
    three = HashRing(["a", "b", "c"])
    before = {k: two.shard_of(k) for k in keys}
    after = {k: three.shard_of(k) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert all(after[k] == "c" for k in moved)  # nothing moves between a and b
    assert 0.2 < len(moved) / len(keys) < 0.5
    assert 0.35 < sum(1 for k in keys if before[k] == "a") / len(keys) < 0.65
