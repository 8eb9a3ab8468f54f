"""reduce, bucketize, apply and filters against independent numpy/pandas computations, and
the equivalence-class edge cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from query_dsl import (
    MatchingError,
    Matrix,
    QueryTypeError,
    apply_op,
    bucketize,
    filter_selector,
    reduce_matrix,
    top,
    where_last,
)

STEP = 60_000
T = 12


def m(names: list[str], labels: list[dict[str, str]], values: np.ndarray | None = None) -> Matrix:
    if values is None:
        values = np.arange(len(names) * T, dtype=float).reshape(len(names), T)
    return Matrix(names, labels, np.arange(T) * STEP, values, STEP)


def racks() -> Matrix:
    labels = [
        {"dc": dc, "rack": rack, "host": f"{dc}{rack}{h}"}
        for dc in ("jb", "par")
        for rack in ("r1", "r2")
        for h in range(3)
    ]
    values = np.random.default_rng(3).normal(10, 3, size=(len(labels), T))
    values[0, 2:5] = np.nan
    return m(["load"] * len(labels), labels, values)


@pytest.mark.parametrize("name", ["sum", "mean", "min", "max", "count", "median", "stddev"])
def test_reduce_by_matches_pandas_groupby(name: str) -> None:
    data = racks()
    frame = pd.DataFrame(
        data.values, index=pd.MultiIndex.from_tuples([(lab["dc"], lab["rack"]) for lab in data.labels])
    )
    grouped = frame.groupby(level=[0, 1])
    expected = {"stddev": lambda g: g.std(ddof=0), "count": lambda g: g.count()}.get(
        name, lambda g: getattr(g, name)()
    )(grouped)
    result = reduce_matrix(data, name, by=["dc", "rack"])
    got = {(lab["dc"], lab["rack"]): row for lab, row in zip(result.labels, result.values, strict=True)}
    for key, row in expected.iterrows():
        np.testing.assert_allclose(got[key], row.to_numpy(dtype=float), rtol=1e-9, equal_nan=True)
    assert all(set(lab) == {"dc", "rack"} for lab in result.labels)  # host differs: dropped
    assert set(result.names) == {"load"}


def test_reduce_without_and_whole_set_and_percentile() -> None:
    data = racks()
    by_dc = reduce_matrix(data, "sum", without=["rack", "host"])
    assert sorted(lab["dc"] for lab in by_dc.labels) == ["jb", "par"]
    everything = reduce_matrix(data, "percentile", params=(90.0,))
    assert len(everything) == 1 and everything.labels == [{}]
    np.testing.assert_allclose(everything.values[0], np.nanpercentile(data.values, 90, axis=0))


def test_reduce_with_missing_labels_forms_its_own_class() -> None:
    data = m(["x"] * 3, [{"rack": "r1"}, {"rack": "r1"}, {}])
    result = reduce_matrix(data, "sum", by=["rack"])
    assert sorted(result.labels, key=len) == [{}, {"rack": "r1"}]
    with pytest.raises(QueryTypeError, match="not both"):
        reduce_matrix(data, "sum", by=["a"], without=["b"])


@pytest.mark.parametrize("aggregate", ["mean", "max", "sum", "last", "first", "count"])
def test_bucketize_matches_pandas_resample(aggregate: str) -> None:
    data = racks()
    span = 5 * STEP
    result = bucketize(data, span, aggregate)
    frame = pd.DataFrame(data.values.T, index=pd.to_datetime(data.timestamps, unit="ms"))
    resampled = frame.resample("5min", closed="right", label="right")
    expected = getattr(resampled, aggregate)()
    if aggregate in ("sum",):
        expected = expected.where(resampled.count() > 0)
    assert result.timestamps.tolist() == (expected.index.astype("int64") // 10**6).tolist()
    np.testing.assert_allclose(result.values, expected.to_numpy().T, equal_nan=True, rtol=1e-9)
    with pytest.raises(QueryTypeError, match="multiple of the step"):
        bucketize(data, 90_000, "mean")


def disks() -> tuple[Matrix, Matrix]:
    hosts = [("h1", "/"), ("h1", "/data"), ("h2", "/")]
    size = m(["disk.size"] * 3, [{"host": h, "volume": v} for h, v in hosts], np.full((3, T), 100.0))
    used = m(
        ["disk.used"] * 3,
        [{"host": h, "volume": v} for h, v in reversed(hosts)],
        np.array([[30.0] * T, [20.0] * T, [10.0] * T]),
    )
    return size, used


def test_one_to_one_matching_by_labels_not_order() -> None:
    size, used = disks()
    free = apply_op("-", size, used)
    assert isinstance(free, Matrix)
    got = {(lab["host"], lab["volume"]): row[0] for lab, row in zip(free.labels, free.values, strict=True)}
    assert got == {("h1", "/"): 90.0, ("h1", "/data"): 80.0, ("h2", "/"): 70.0}
    assert set(free.names) == {""}


def test_on_and_ignoring_restrict_the_class_and_the_result_labels() -> None:
    size, used = disks()
    used_with_extra = Matrix(
        used.names, [dict(lab, fs="ext4") for lab in used.labels], used.timestamps, used.values, STEP
    )
    assert len(apply_op("-", size, used_with_extra)) == 0  # classes differ by fs
    ignoring = apply_op("-", size, used_with_extra, ignoring=["fs"])
    on = apply_op("-", size, used_with_extra, on=["host", "volume"])
    assert isinstance(ignoring, Matrix) and isinstance(on, Matrix)
    assert np.array_equal(ignoring.values, on.values) and len(on) == 3
    assert all(set(lab) == {"host", "volume"} for lab in on.labels)


def test_many_to_one_must_be_asked_for() -> None:
    requests = m(
        ["req"] * 4,
        [{"host": h, "method": x} for h in ("a", "b") for x in ("GET", "PUT")],
        np.full((4, T), 10.0),
    )
    capacity = m(["cap"] * 2, [{"host": "a"}, {"host": "b"}], np.array([[2.0] * T, [5.0] * T]))
    with pytest.raises(MatchingError, match="must be asked for"):
        apply_op("/", requests, capacity, on=["host"])
    share = apply_op("/", requests, capacity, on=["host"], group="left")
    assert isinstance(share, Matrix)
    got = {(lab["host"], lab["method"]): row[0] for lab, row in zip(share.labels, share.values, strict=True)}
    assert got == {("a", "GET"): 5.0, ("a", "PUT"): 5.0, ("b", "GET"): 2.0, ("b", "PUT"): 2.0}
    with pytest.raises(MatchingError, match="share"):
        apply_op("/", capacity, requests, on=["host"], group="left")  # the "one" side is not unique


def test_singletons_and_scalars_apply_to_all() -> None:
    size, _ = disks()
    total = reduce_matrix(size, "sum")
    ratio = apply_op("/", size, total)
    assert isinstance(ratio, Matrix) and len(ratio) == 3
    np.testing.assert_allclose(ratio.values, 100.0 / 300.0)
    doubled = apply_op("*", 2.0, size)
    assert isinstance(doubled, Matrix) and doubled.values[0, 0] == 200.0
    assert apply_op("+", 1.0, 2.0) == 3.0


def test_comparisons_filter_or_give_booleans() -> None:
    _, used = disks()
    over = apply_op(">", used, 15.0)
    assert isinstance(over, Matrix)
    assert len(over) == 2 and over.values[0, 0] == 30.0  # the disk never over 15 is dropped
    assert [lab["volume"] for lab in over.labels] == [lab["volume"] for lab in used.labels[:2]]
    matched = apply_op(">", used, used)  # never greater than itself: nothing left
    assert isinstance(matched, Matrix) and len(matched) == 0
    flags = apply_op(">", used, 15.0, as_bool=True)
    assert isinstance(flags, Matrix) and flags.values[:, 0].tolist() == [1.0, 1.0, 0.0]


def test_set_operators() -> None:
    size, used = disks()
    only_h1 = filter_selector(used, "{host=h1}")
    assert len(apply_op("and", size, only_h1)) == 2
    assert [lab["host"] for lab in apply_op("unless", size, only_h1).labels] == ["h2"]  # type: ignore[union-attr]
    both = apply_op("or", filter_selector(size, "{host=h2}"), only_h1)
    assert isinstance(both, Matrix) and len(both) == 3
    with pytest.raises(QueryTypeError, match="series on both sides"):
        apply_op("and", size, 1.0)


def test_misaligned_axes_are_refused() -> None:
    size, used = disks()
    shifted = Matrix(used.names, used.labels, used.timestamps + STEP, used.values, STEP)
    with pytest.raises(MatchingError, match="same time axis"):
        apply_op("-", size, shifted)


def test_filters() -> None:
    data = racks()
    assert len(filter_selector(data, "load{dc=jb, rack!=r2}")) == 3
    assert len(filter_selector(data, "~lo.*{host~par.*}")) == 6
    last = data.values[:, -1]
    assert [lab["host"] for lab in top(data, 2).labels] == [
        data.labels[i]["host"] for i in np.argsort(last)[::-1][:2]
    ]
    assert [lab["host"] for lab in top(data, 1, largest=False).labels] == [
        data.labels[int(np.argmin(last))]["host"]
    ]
    assert len(where_last(data, ">", float(np.median(last)))) == int((last > np.median(last)).sum())
