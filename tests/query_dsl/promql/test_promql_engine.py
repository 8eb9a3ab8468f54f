"""PromQL over an in-process store: Artimon's dotted names as Prometheus 3's quoted names,
STRING series, the warning of a coarser ring, the public contract's errors."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from query_dsl import Matrix, QueryError, QueryLimitError
from query_dsl.promql import PromQLSyntaxError, instant_query, parse, range_query
from query_dsl.promql.labels import prometheus_order, sort_key
from vhms import LocalClient
from vhms.server import Store


@pytest.fixture
def now_s() -> int:
    return int(time.time()) // 60 * 60


def _store(now_s: int, resolutions: str = "15s:100") -> Store:
    store = Store(resolutions)
    times = (now_s - 15 * np.arange(20)[::-1]) * 1000
    for method, scale in (("GET", 1.0), ("PUT", 2.0)):
        key = f"http.requests{{dc=jb,method={method}}}"
        store.ingest([key] * 20, scale * np.arange(20.0), times)
    store.ingest_strings(["build.version{dc=jb}"], ["1.2.3"], np.array([now_s * 1000]))
    return store


def test_dotted_names_are_quoted_names(now_s: int) -> None:
    source = LocalClient(_store(now_s))
    answer = instant_query(source, 'rate({"http.requests", method="GET"}[1m])', now_s).to_prometheus_json()
    assert answer["resultType"] == "vector"
    assert [item["metric"] for item in answer["result"]] == [{"dc": "jb", "method": "GET"}]
    assert float(answer["result"][0]["value"][1]) == pytest.approx(1 / 15)
    same = instant_query(source, '{__name__="http.requests"}', now_s).to_prometheus_json()["result"]
    assert sorted(item["metric"]["__name__"] for item in same) == ["http.requests", "http.requests"]
    assert instant_query(source, 'sum by ("method") ({"http.requests"})', now_s).result_type == "vector"


def test_string_series_have_no_samples(now_s: int) -> None:
    source = LocalClient(_store(now_s))
    assert instant_query(source, '{"build.version"}', now_s).to_prometheus_json()["result"] == []
    assert instant_query(source, 'absent({"build.version"})', now_s).to_prometheus_json()["result"] != []


def test_a_coarser_ring_says_so(now_s: int) -> None:
    source = LocalClient(_store(now_s, "15s:4,1m:60"))
    result = range_query(source, '{"http.requests"}', now_s - 240, now_s, 60)
    assert result.warnings and "60 s ring" in result.warnings[0]
    assert instant_query(source, 'last_over_time({"http.requests"}[30s])', now_s).warnings == []


def test_the_contract_errors(now_s: int) -> None:
    source = LocalClient(_store(now_s))
    with pytest.raises(PromQLSyntaxError) as caught:
        parse("sum(")
    assert isinstance(caught.value, QueryError) and isinstance(caught.value, ValueError)
    with pytest.raises(QueryLimitError, match="11,000"):
        range_query(source, "1", 0, 11_000, 1)
    assert range_query(source, "1", 0, 10_999, 1).to_prometheus_json()["resultType"] == "matrix"
    assert instant_query(source, '"text"', now_s).to_prometheus_json() == {
        "resultType": "string",
        "result": [now_s, "text"],
    }


_VALUES = st.sampled_from(["1", "10", "2", "Z", "a", "é"])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "a", "B", "_x", "zz"]),
            st.dictionaries(st.sampled_from(["a", "Zk", "b", "_c"]), _VALUES, max_size=3),
        ),
        max_size=8,
    )
)
def test_answers_are_in_prometheus_order_of_label_sets(series: list[tuple[str, dict[str, str]]]) -> None:
    names = [name for name, _ in series]
    labels = [label_set for _, label_set in series]
    m = Matrix(names, labels, [0], np.zeros((len(series), 1)), 1)
    keys = [sort_key({"__name__": n, **ls} if n else ls) for n, ls in series]
    ordered = [keys[i] for i in prometheus_order(m)]
    assert ordered == sorted(keys)


@pytest.mark.parametrize("op", ["topk", "bottomk"])
def test_a_tie_at_the_kth_place_goes_to_the_series_first_in_label_order(now_s: int, op: str) -> None:
    """Prometheus's heap keeps the series it met first among equal values, and it meets them
    in label order; the store's own order (of arrival) must not decide (the compliance
    tester's ``bottomk without(instance) (2, demo_memory_usage_bytes)`` met such a tie)."""
    store = Store("15s:100")
    times = np.array([now_s * 1000])
    for instance, value in (("c", 5.0), ("b", 9.0), ("a", 5.0)):  # arrival: c before a
        store.ingest([f"mem{{instance={instance},job=demo}}"], np.array([value]), times)
    k = 1 if op == "bottomk" else 2
    answer = instant_query(LocalClient(store), f"{op} without(instance) ({k}, mem)", now_s)
    kept = sorted(item["metric"]["instance"] for item in answer.to_prometheus_json()["result"])
    assert kept == (["a"] if op == "bottomk" else ["a", "b"])


@pytest.mark.parametrize("labels", [3, 16])  # 16 labels of 20 values each: more orders than an int64 holds
def test_many_series_are_in_prometheus_order_of_label_sets(labels: int) -> None:
    rng = np.random.default_rng(labels)
    values = [str(v) for v in range(20)]
    sets = [{f"l{k}": values[(row + k * 7) % 20] for k in range(labels)} for row in range(100)]
    sets += [{f"l{k}": str(rng.choice(values)) for k in range(labels)} for _ in range(200)]
    m = Matrix(["up"] * len(sets), sets, [0], np.zeros((len(sets), 1)), 1)
    keys = [sort_key({"__name__": "up", **label_set}) for label_set in sets]
    assert [keys[i] for i in prometheus_order(m)] == sorted(keys)
