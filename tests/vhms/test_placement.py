"""Placement of series on shards by consistent hashing."""

from __future__ import annotations

import numpy as np

from bookkeeper.ground import series_hashes
from bookkeeper.wire import series_keys
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


def test_a_series_lands_on_the_same_shard_from_its_columns_or_its_key_whatever_its_batch() -> None:
    ring = HashRing(["a", "b", "c"])
    names = ["cpu", "mem"]
    label_sets = [f"path=/p{i}" for i in range(200)]
    name_ids = np.repeat(np.arange(2, dtype=np.int32), 200)
    set_ids = np.tile(np.arange(200, dtype=np.int32), 2)
    common = {"host": "h1", "dc": "x"}
    by_columns = ring.shards_of(series_hashes(common, names, label_sets, name_ids, set_ids)).tolist()
    keys = series_keys(common, names, label_sets, name_ids, set_ids)
    assert by_columns == [ring.shard_of(key) for key in keys]
    # the same series in another batch: other tables, another order, the common labels given per set
    merged = [f"dc=x,host=h1,path=/p{i}" for i in reversed(range(200))]
    again = ring.shards_of(
        series_hashes({}, ["mem", "cpu"], merged, np.zeros(200, dtype=np.int32), np.arange(200))
    )
    assert again.tolist() == by_columns[200:][::-1]
