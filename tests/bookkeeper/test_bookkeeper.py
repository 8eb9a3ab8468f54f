from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from bookkeeper import (
    Bookkeeper,
    InvalidLabelError,
    InvalidNameError,
    InvalidValueError,
    VariableTypeError,
    VarType,
)


@pytest.fixture
def bk() -> Bookkeeper:
    return Bookkeeper("test", environ={})


def test_artimon_api_for_each_type(bk: Bookkeeper) -> None:
    labels = {"method": "GET"}
    bk.set_integer_var("http.requests", labels, 5)
    assert bk.add_to_integer_var("http.requests", labels, 3) == 8
    assert bk.get_integer_var("http.requests", labels) == 8
    bk.set_double_var("cpu.load", labels, 0.25)
    assert bk.add_to_double_var("cpu.load", labels, 0.5) == 0.75
    assert bk.get_double_var("cpu.load", labels) == 0.75
    bk.set_string_var("version", labels, "1.2")
    assert bk.get_string_var("version", labels) == "1.2"
    bk.set_boolean_var("up", labels, True)
    assert bk.get_boolean_var("up", labels) is True
    assert len(bk) == 4
    for remove, get, name in [
        (bk.remove_integer_var, bk.get_integer_var, "http.requests"),
        (bk.remove_double_var, bk.get_double_var, "cpu.load"),
        (bk.remove_string_var, bk.get_string_var, "version"),
        (bk.remove_boolean_var, bk.get_boolean_var, "up"),
    ]:
        assert remove(name, labels) is True
        assert get(name, labels) is None
        assert remove(name, labels) is False
    assert len(bk) == 0


def test_handles_are_cached_per_series_whatever_the_label_order(bk: Bookkeeper) -> None:
    a = bk.integer("x", {"b": "2", "a": "1"})
    b = bk.integer("x", a="1", b="2")
    assert a is b
    a.add()
    b.add(2)
    assert bk.get_integer_var("x", {"a": "1", "b": "2"}) == 3
    assert bk.integer("x", a="1") is not a


def test_a_series_keeps_its_type(bk: Bookkeeper) -> None:
    bk.integer("x", a="1").add()
    with pytest.raises(VariableTypeError, match=r"x\{a=1\} is a INTEGER variable, not DOUBLE"):
        bk.double("x", a="1")
    with pytest.raises(VariableTypeError):
        bk.get_string_var("x", {"a": "1"})


@pytest.mark.parametrize(
    ("name", "labels", "error", "offender"),
    [
        ("", {}, InvalidNameError, "1 to 200"),
        ("9lives", {}, InvalidNameError, "'9lives'"),
        ("has space", {}, InvalidNameError, "'has space'"),
        ("x" * 201, {}, InvalidNameError, "got 201"),
        ("ok", {"bad key": "v"}, InvalidLabelError, "'bad key'"),
        ("ok", {"k": ""}, InvalidLabelError, "'k' value"),
        ("ok", {"k": "a\nb"}, InvalidLabelError, "control character"),
        ("ok", {"k": "v" * 1025}, InvalidLabelError, "got 1025"),
        ("ok", {f"k{i}": "v" for i in range(33)}, InvalidLabelError, "at most 32"),
        ("ok", {"k": 3}, InvalidLabelError, "must have a str value"),
    ],
)
def test_bad_names_and_labels_name_the_offender(
    bk: Bookkeeper, name: str, labels: dict, error: type, offender: str
) -> None:
    with pytest.raises(error, match=offender) as info:
        bk.set_integer_var(name, labels, 1)
    assert isinstance(info.value, ValueError)
    assert len(bk) == 0


def test_label_values_may_hold_any_printable_text(bk: Bookkeeper) -> None:
    labels = {"path": "/a b,c=d{e}%'é"}
    bk.integer("hits", labels).add()
    (sample,) = bk.snapshot().samples()
    assert sample.labels["path"] == labels["path"]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_set_refuses_non_finite_doubles(bk: Bookkeeper, bad: float) -> None:
    var = bk.double("g")
    var.set(1.0)
    with pytest.raises(InvalidValueError, match="non-finite"):
        var.set(bad)
    assert var.get() == 1.0


def test_add_does_not_check_finiteness_as_documented(bk: Bookkeeper) -> None:
    var = bk.double("g")
    var.add(math.inf)
    assert var.get() == math.inf
    assert math.isnan(var.add_and_get(-math.inf))


def test_set_checks_types_and_ranges(bk: Bookkeeper) -> None:
    with pytest.raises(TypeError, match="takes an int"):
        bk.set_integer_var("i", {}, 1.5)
    with pytest.raises(InvalidValueError, match="64 bits"):
        bk.set_integer_var("i", {}, 2**63)
    with pytest.raises(TypeError, match="takes a bool"):
        bk.set_boolean_var("b", {}, 1)
    with pytest.raises(TypeError, match="takes a str"):
        bk.set_string_var("s", {}, 1)
    with pytest.raises(TypeError, match="takes an int"):
        bk.integer("i").add(0.5)


def test_integer_add_wraps_like_a_java_long(bk: Bookkeeper) -> None:
    var = bk.integer("i")
    var.set(2**63 - 1)
    assert var.add_and_get(1) == -(2**63)
    var.set(2**63 - 1)
    var.add(np.int64(2))
    assert var.get() == -(2**63) + 1
    (sample,) = bk.snapshot().samples()
    assert sample.value == -(2**63) + 1


def test_concurrent_adds_lose_nothing(bk: Bookkeeper) -> None:
    var = bk.integer("hits")
    threads = [threading.Thread(target=lambda: [var.add(1) for _ in range(20_000)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert var.get() == 80_000


def test_removed_handle_comes_back_on_update(bk: Bookkeeper) -> None:
    var = bk.integer("i", a="1")
    var.add(5)
    assert var.remove() is True
    assert len(bk.snapshot()) == 0
    var.add(1)
    assert bk.get_integer_var("i", {"a": "1"}) == 6
    assert len(bk.snapshot()) == 1


def test_removed_handle_takes_over_a_recreated_series(bk: Bookkeeper) -> None:
    old = bk.integer("i")
    old.add(5)
    old.remove()
    new = bk.integer("i")
    assert new is not old
    new.add(10)
    old.add(1)
    assert bk.get_integer_var("i", {}) == 11
    new.add(1)
    assert bk.get_integer_var("i", {}) == 12
    assert len(bk.snapshot()) == 1


def test_snapshot_is_columnar_and_complete(bk: Bookkeeper) -> None:
    for i in range(100):
        bk.integer("c", i=str(i)).set(i)
    bk.double("d").set(2.5)
    bk.boolean("b").set(True)
    bk.string("s").set("x")
    batch = bk.snapshot()
    batch.validate()
    assert len(batch) == 103
    assert batch.names == ["c", "d", "b", "s"]
    assert len(batch.label_sets) == 101
    counters = batch.types == VarType.INTEGER
    assert sorted(batch.values[counters].tolist()) == list(range(100))
    numeric = batch.numeric_values()
    assert numeric[batch.types == VarType.DOUBLE].tolist() == [2.5]
    assert numeric[batch.types == VarType.BOOLEAN].tolist() == [1.0]
    assert np.isnan(numeric[batch.types == VarType.STRING]).all()
    assert batch.strings == ["x"]
    assert batch.common_labels["context"] == "test"


def test_default_and_per_context_bookkeepers_are_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARTIMON_CONTEXT", "ctx-shared-test")
    assert Bookkeeper.default() is Bookkeeper.for_context("ctx-shared-test")
    assert Bookkeeper.for_context("other-shared-test") is not Bookkeeper.default()
