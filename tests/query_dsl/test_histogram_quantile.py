"""histogram_quantile of the query language: PromQL's answers (checked against Prometheus's
own engine through promtool), edge cases, refusals."""

from __future__ import annotations

import math
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from bookkeeper.wire import format_series
from query_dsl import Evaluator, QueryTypeError
from vhms import LocalClient
from vhms.server import Store

MINUTE = 60_000


def evaluate(series: dict[str, float], query: str) -> dict[str, float]:
    """``query`` over a store holding ``series`` (key -> value) at the current minute; the
    last value of each answer, by its labels."""
    now = int(time.time() * 1000) // MINUTE * MINUTE
    store = Store()
    keys = list(series)
    store.ingest(keys, np.array([series[k] for k in keys], dtype=np.float64), np.full(len(keys), now))
    answer = Evaluator(LocalClient(store)).evaluate(query)
    return {
        ",".join(f"{k}={v}" for k, v in sorted(labels.items())): float(row[-1])
        for labels, row in zip(answer.table.label_dicts(), answer.values, strict=True)
    }


def random_histograms(rng: np.random.Generator, classes: int) -> dict[str, float]:
    bounds = ["0.005", "0.01", "0.1", "0.5", "1", "2.5", "+Inf"]
    series = {}
    for c in range(classes):
        increments = rng.integers(0, 6, len(bounds)) * rng.integers(1, 30)  # empty buckets too
        increments[-1] += 1  # an observation at least (no observation: NaN, which promtool cannot expect)
        counts = np.cumsum(increments)
        for bound, count in zip(bounds, counts.tolist(), strict=True):
            series[format_series("lat_bucket", {"c": f"c{c}", "le": bound})] = float(count)
    return series


@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs Debian's prometheus (promtool)")
def test_the_answers_of_prometheus_itself(tmp_path: Path) -> None:
    """Random histograms, six quantiles: promtool's unit test
    of Prometheus's engine expects exactly our answers."""
    series = random_histograms(np.random.default_rng(7), 30)
    tests = []
    for q in (0.01, 0.25, 0.5, 0.9, 0.99, 1.0):  # q = 0 over an empty first bucket is 0/0: NaN
        ours = evaluate(series, f'fetch("lat_bucket", last=10m) | histogram_quantile({q})')
        assert len(ours) == 30
        tests.append(
            {
                "expr": f"histogram_quantile({q}, lat_bucket)",
                "eval_time": "0m",
                "exp_samples": [
                    {"labels": "{" + labels.replace("=", '="').replace(",", '",') + '"}', "value": value}
                    for labels, value in ours.items()
                ],
            }
        )
    spec = {
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": key.replace("{", "{")
                        .replace("=", '="')
                        .replace(",", '",')
                        .replace("}", '"}'),
                        "values": str(v),
                    }
                    for key, v in series.items()
                ],
                "promql_expr_test": tests,
            }
        ]
    }
    path = tmp_path / "quantiles.yml"
    path.write_text(yaml.safe_dump(spec))
    run = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


def test_edges() -> None:
    base = {"lat_bucket{c=a,le=0.5}": 0.0, "lat_bucket{c=a,le=1}": 10.0, "lat_bucket{c=a,le=+Inf}": 10.0}
    query = 'fetch("lat_bucket", last=10m) | histogram_quantile({q})'
    assert evaluate(base, query.format(q=0.5)) == {"c=a": 0.75}
    assert evaluate(base, query.format(q=-1)) == {"c=a": -math.inf}
    assert evaluate(base, query.format(q=2)) == {"c=a": math.inf}
    in_inf = {**base, "lat_bucket{c=a,le=+Inf}": 20.0}
    assert evaluate(in_inf, query.format(q=0.9)) == {"c=a": 1.0}  # the highest finite bound
    no_inf = {k: v for k, v in base.items() if "Inf" not in k}
    assert math.isnan(evaluate(no_inf, query.format(q=0.5))["c=a"])
    empty = {k: 0.0 for k in base}
    assert math.isnan(evaluate(empty, query.format(q=0.5))["c=a"])
    decreasing = {**base, "lat_bucket{c=a,le=0.5}": 12.0}  # made monotonic: all in the first bucket
    assert evaluate(decreasing, query.format(q=0.5)) == {"c=a": 0.25}


def test_refusals() -> None:
    with pytest.raises(QueryTypeError, match="'le'"):
        evaluate({"lat{c=a}": 1.0}, 'fetch("lat", last=10m) | histogram_quantile(0.5)')
    with pytest.raises(QueryTypeError, match="le='x'"):
        evaluate({"lat_bucket{le=x}": 1.0}, 'fetch("lat_bucket", last=10m) | histogram_quantile(0.5)')
