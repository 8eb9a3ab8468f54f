"""Ingest by the batch's symbol table answers exactly as ingest by a key string per sample
did: the same batches, ingested the old way (canonical keys) into one store and the new way
(``SampleBatch.ingest_columns``) into another, give identical fetches and label columns."""

from __future__ import annotations

import time

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bookkeeper import SampleBatch
from bookkeeper.wire import format_labels
from vhms.server import Store

MINUTE = 60_000
NOW = int(time.time() * 1000) // MINUTE * MINUTE
_VALUES = st.text(alphabet="ab,={} %'é\n", min_size=1, max_size=3)
_LABELS = st.dictionaries(st.sampled_from(["host", "dc", "path", "method"]), _VALUES, max_size=3)


@st.composite
def _batches(draw: st.DrawFn) -> SampleBatch:
    names = draw(
        st.lists(st.sampled_from(["cpu", "mem.free", "q:x", "_n"]), min_size=1, max_size=3, unique=True)
    )
    sets = draw(st.lists(_LABELS, min_size=1, max_size=4))
    pairs = sorted(
        set(draw(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), min_size=1, max_size=12)))
    )
    rows = [(n % len(names), s % len(sets)) for n, s in pairs]
    count = len(rows)
    return SampleBatch(
        context="ctx",
        snapshot_ms=NOW,
        common_labels=draw(_LABELS),
        names=names,
        label_sets=[format_labels(labels) for labels in sets],
        name_ids=np.array([n for n, _ in rows], dtype=np.int32),
        label_set_ids=np.array([s for _, s in rows], dtype=np.int32),
        types=np.full(count, 2, dtype=np.uint8),  # DOUBLE
        values=np.arange(count, dtype=np.float64).view(np.int64),
        timestamps=np.full(count, NOW, dtype=np.int64) - draw(st.integers(0, 3)) * MINUTE,
    )


@settings(max_examples=50, deadline=None)
@given(st.lists(_batches(), min_size=1, max_size=4), st.integers(1, 2))
def test_the_same_batches_by_keys_and_by_columns_answer_alike(
    batches: list[SampleBatch], rounds: int
) -> None:
    by_keys, by_columns = Store(), Store()
    for _ in range(rounds):
        for batch in batches:
            by_keys.ingest(batch.series_keys(), batch.numeric_values(), batch.timestamps)
            by_columns.ingest_columns(batch.ingest_columns())
    assert by_columns.series == by_keys.series
    old = by_keys.fetch("{}", NOW - 5 * MINUTE, NOW + MINUTE)
    new = by_columns.fetch("{}", NOW - 5 * MINUTE, NOW + MINUTE)
    assert new.keys == old.keys
    assert {label: (values, codes.tolist()) for label, (values, codes) in new.labels.items()} == {
        label: (values, codes.tolist()) for label, (values, codes) in old.labels.items()
    }
    np.testing.assert_array_equal(new.values, old.values)
    np.testing.assert_array_equal(new.timestamps, old.timestamps)
    assert by_columns.label_names() == by_keys.label_names()
