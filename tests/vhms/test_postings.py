"""Postings (``vhms/server/postings.py``): new series wait to be posted, a chunk per batch, and
are grouped when enough wait or when a reader comes; what a reader sees is what appending
each series to its postings at once would have given."""

from __future__ import annotations

import threading

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vhms.selector import parse_selector
from vhms.server.postings import Postings

_VALUES = {"__name__": ["cpu", "mem"], "dc": ["a", "b", "c"], "host": [f"h{i}" for i in range(300)]}

# a batch: per new series, the code of each label it has (-1: not that label)
_series = st.fixed_dictionaries(
    {label: st.integers(-1, len(values) - 1) for label, values in _VALUES.items() if label != "__name__"}
    | {"__name__": st.integers(0, 1)}
)
_batches = st.lists(
    st.tuples(st.lists(_series, min_size=1, max_size=30), st.booleans()), min_size=1, max_size=8
)


@settings(max_examples=40, deadline=None)
@given(_batches, st.integers(1, 60))
def test_waiting_postings_read_as_if_posted_at_once(
    batches: list[tuple[list[dict[str, int]], bool]], wait: int
) -> None:
    postings = Postings({label: list(values) for label, values in _VALUES.items()}, threading.Lock(), wait)
    reference: dict[tuple[str, str], list[int]] = {}
    first = 0
    for series, read_after in batches:
        chunks = {}
        for label, values in _VALUES.items():
            codes = np.array([s[label] for s in series], dtype=np.int32)
            owners = np.flatnonzero(codes >= 0)
            chunks[label] = ((owners + first).astype(np.int32), codes[owners])
            for owner, code in zip(owners.tolist(), codes[owners].tolist(), strict=True):
                reference.setdefault((label, values[code]), []).append(owner + first)
        postings.add(chunks, len(series))
        first += len(series)
        if read_after:
            _check(postings, reference)
    _check(postings, reference)


def _check(postings: Postings, reference: dict[tuple[str, str], list[int]]) -> None:
    for label, values in _VALUES.items():
        assert sorted(postings.values(label)) == sorted(v for (k, v) in reference if k == label)
        for value in values:
            matcher = parse_selector(f"{{{label}={value}}}").matchers[0]
            assert postings.having(matcher, None).tolist() == reference.get((label, value), [])
    regex = parse_selector("{host~h1.*}").matchers[0]
    expected = sorted(
        i for (k, v), ids in reference.items() if k == "host" and v.startswith("h1") for i in ids
    )
    assert postings.having(regex, None).tolist() == expected
    assert sorted(postings.labels()) == sorted({k for k, _ in reference})
