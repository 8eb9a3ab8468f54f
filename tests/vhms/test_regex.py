"""Regexes from users run in RE2: a ReDoS corpus and generated regexes against a store with
many label values answer within a bound; what RE2 cannot do is a clear ``SelectorError``;
a selection that runs too long stops at ``max_select_s`` and never holds up ingest."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vhms import MAX_REGEX_LENGTH, MAX_SELECTOR_LENGTH, FetchLimitError, SelectorError, parse_selector
from vhms.server import Store

NOW = int(time.time() * 1000) // 60_000 * 60_000
VALUES = 20_000
# a few seconds on a loaded 2-core machine; RE2 needs milliseconds, Python's re needs ages
BOUND_S = 5.0


def quoted(regex: str) -> str:
    """A regex as a quoted selector value (backslashes and quotes escaped)."""
    return '"' + regex.replace("\\", "\\\\").replace('"', '\\"') + '"'


def selectors(regex: str) -> list[str]:
    """The selectors that run ``regex``: on a label, negated, on names (a name regex ends
    at the first brace, so only those without one)."""
    return [f"{{v~{quoted(regex)}}}", f"{{v!~{quoted(regex)}}}"] + ([f"~{regex}"] if "{" not in regex else [])


@pytest.fixture(scope="module")
def store(redos_label_values: Callable[[int], list[str]]) -> Store:
    store = Store(max_series=VALUES + 10, max_series_per_query=VALUES + 10)
    keys = [f"{'a' * (20 + i % 10)}.m{{v={value}}}" for i, value in enumerate(redos_label_values(VALUES))]
    store.ingest(keys, np.ones(len(keys)), np.full(len(keys), NOW))
    return store


def test_catastrophic_regexes_answer_within_a_bound(store: Store, redos_corpus: tuple[str, ...]) -> None:
    for pattern in redos_corpus:
        for selector in selectors(pattern):
            started = time.perf_counter()
            try:
                ids = store.select(selector)
            except FetchLimitError:  # a selector that takes too long is refused, also an answer
                ids = None
            took = time.perf_counter() - started
            assert took < BOUND_S, f"{selector} took {took:.1f} s"
            if ids is not None and pattern == "(a+)+$":  # no value is all a: nothing, or all
                assert len(ids) == (VALUES if selector.startswith("{v!~") else 0)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_generated_regexes_answer_within_a_bound(
    store: Store, redos_regexes: st.SearchStrategy[str], data: st.DataObject
) -> None:
    pattern = data.draw(redos_regexes)
    for selector in selectors(pattern):
        started = time.perf_counter()
        with contextlib.suppress(FetchLimitError, SelectorError):  # too slow, or not RE2 (a?*)
            store.select(selector)
        assert time.perf_counter() - started < BOUND_S, selector


@pytest.mark.parametrize(
    "pattern",
    ["h.*", "h[0-9]+", "(?i)H1", "h1|h2", "h\\d{2,}", "[^0-9]+", "h1.*|.*9", "h(1|2)0?", "h[0-9]{1,1}"],
)
def test_ordinary_regexes_match_as_before(pattern: str) -> None:
    """RE2 and Python agree on the syntax both have; regexes still match whole values."""
    store = Store()
    values = [f"h{i}" for i in range(40)] + ["x", "H1"]
    store.ingest([f"m{{host={v}}}" for v in values], np.ones(len(values)), np.full(len(values), NOW))
    expected = {f"m{{host={v}}}" for v in values if re.fullmatch(pattern, v)}
    for selector in (f"m{{host~{quoted(pattern)}}}", f"m{{host~{pattern}}}"):
        assert set(store.index.keys_of(store.select(selector))) == expected, selector


@pytest.mark.parametrize(
    ("regex", "reason"),
    [
        ("(a)\\1", "invalid escape sequence"),  # a backreference
        ("a(?=b)", "invalid perl operator"),  # lookahead
        ("(?<!x)y", "invalid perl operator"),  # lookbehind
        ("(?>a+)b", "invalid perl operator"),  # an atomic group
        ("a++", "bad repetition operator"),  # possessive
        ("\\pL{1000}", "pattern too large"),  # over RE2's program memory
        ("(\\pL|\\pN){150}", "instructions, more than 10,000"),  # over MAX_PROGRAM_SIZE
        ("(", "missing )"),
    ],
)
def test_what_re2_cannot_do_is_a_clear_selector_error(regex: str, reason: str) -> None:
    with pytest.raises(SelectorError, match=re.escape(reason)) as info:
        parse_selector(f"{{v~{quoted(regex)}}}")
    assert repr(regex) in str(info.value)


def test_regex_and_selector_lengths_are_bounded() -> None:
    parse_selector("{v~" + "a" * MAX_REGEX_LENGTH + "}")
    with pytest.raises(SelectorError, match=f"at most {MAX_REGEX_LENGTH} characters"):
        parse_selector("{v~" + "a" * (MAX_REGEX_LENGTH + 1) + "}")
    with pytest.raises(SelectorError, match=f"at most {MAX_SELECTOR_LENGTH} characters"):
        parse_selector("{" + ",".join(["v=a"] * MAX_SELECTOR_LENGTH) + "}")


def test_a_slow_selection_stops_at_max_select_s_and_never_holds_up_ingest() -> None:
    """1,000-character values against a regex whose DFA explodes: about 0.3 ms a value in
    RE2, so 20,000 values take seconds; the store stops at max_select_s, and ingest goes on
    meanwhile (the selection holds no store lock)."""
    rng = np.random.default_rng(7)
    values = ["".join(rng.choice(["a", "b"], 1000)) + str(i) for i in range(20_000)]
    store = Store(max_select_s=0.5)
    store.ingest([f"m{{v={v}}}" for v in values], np.ones(len(values)), np.full(len(values), NOW))
    outcome: list[BaseException] = []

    def select() -> None:
        try:
            store.fetch('{v~"[ab]*a[ab]{20}[0-9]+"}', NOW - 60_000, NOW + 60_000)
        except FetchLimitError as exc:
            outcome.append(exc)

    started = time.perf_counter()
    worker = threading.Thread(target=select)
    worker.start()
    time.sleep(0.05)  # the selection is under way: an ingest now must not wait for it
    ingest_started = time.perf_counter()
    store.ingest(["other{k=v}"], np.ones(1), np.full(1, NOW))
    ingest_took = time.perf_counter() - ingest_started
    worker.join(BOUND_S)
    took = time.perf_counter() - started
    assert not worker.is_alive() and outcome, "the selection did not stop"
    assert "max_select_s=0.5" in str(outcome[0]) and took < 0.5 + 1.5
    assert ingest_took < 0.3, f"ingest waited {ingest_took:.2f} s for the selection"
    assert store.stats["selects_too_slow"] == 1


def test_slow_values_are_checked_one_at_a_time() -> None:
    """A large program whose DFA thrashes costs about 50 ms a 1,000-character value: the
    deadline is checked between values, not after a slice of 64 of them (3 s)."""
    rng = np.random.default_rng(11)
    values = ["".join(rng.choice(list("abcd"), 1000)) + str(i) for i in range(300)]
    store = Store(max_select_s=0.3)
    store.ingest([f"m{{v={v}}}" for v in values], np.ones(len(values)), np.full(len(values), NOW))
    started = time.perf_counter()
    with pytest.raises(FetchLimitError, match=re.escape("max_select_s=0.3")):
        store.select('{v~"[abcd]*a[abcd]{14}(.*){1,900}[0-9]+"}')
    assert time.perf_counter() - started < 0.3 + 0.7
