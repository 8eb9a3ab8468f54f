"""PromQL's histogram_quantile computes the classes that share their buckets side by side
(query_dsl/promql/functions.py): each class answers, bit for bit, what it answers alone,
with other classes of other buckets, missing buckets, NaN samples and gaps beside it."""

from __future__ import annotations

import numpy as np
import pytest

from query_dsl.matrix import Matrix
from query_dsl.promql.functions import INSTANT_FUNCTIONS
from query_dsl.promql.values import NAN_VALUE, Scalar

BOUNDS = [["0.1", "0.5", "1", "+Inf"], ["0.1", "0.5", "1", "+Inf"], ["1", "2", "+Inf"], ["0.1", "0.5", "1"]]


def _histograms(rng: np.random.Generator, steps: int) -> Matrix:
    names, labels, rows = [], [], []
    for c in range(8):
        bounds = BOUNDS[c % len(BOUNDS)]
        counts = np.cumsum(rng.integers(0, 5, (len(bounds), steps)), axis=0).astype(np.float64)
        counts[:, rng.random(steps) < 0.2] = np.nan  # a gap in every bucket
        counts[rng.integers(0, len(bounds)), rng.random(steps) < 0.2] = np.nan  # a bucket missing
        counts[rng.integers(0, len(bounds)), rng.random(steps) < 0.05] = NAN_VALUE
        for bound, row in zip(bounds, counts, strict=True):
            names.append("lat_bucket")
            labels.append({"c": f"c{c}", "le": bound})
            rows.append(row)
    return Matrix(names, labels, np.arange(steps) * 10_000, np.array(rows), 10_000)


@pytest.mark.parametrize("seed", range(4))
def test_each_class_answers_what_it_answers_alone(seed: int) -> None:
    rng = np.random.default_rng(seed)
    steps = 40
    m = _histograms(rng, steps)
    q = Scalar(rng.choice([0.0, 0.25, 0.5, 0.99, 1.0, -0.5, 1.5, np.nan], steps))
    function = INSTANT_FUNCTIONS["histogram_quantile"]
    together = function([q, m], m.timestamps)
    assert isinstance(together, Matrix)
    rows = {
        labels["c"]: row for labels, row in zip(together.table.label_dicts(), together.values, strict=True)
    }
    members = np.array([labels["c"] for labels in m.table.label_dicts()])
    for c in sorted(set(members.tolist())):
        alone = function([q, Matrix.from_table(*_take(m, members == c))], m.timestamps)
        assert isinstance(alone, Matrix)
        assert np.array_equal(rows[c].view(np.uint64), alone.values[0].view(np.uint64))


def _take(m: Matrix, keep: np.ndarray) -> tuple:
    rows = np.flatnonzero(keep)
    return m.table.take(rows), m.timestamps, m.values[rows], m.step_ms
