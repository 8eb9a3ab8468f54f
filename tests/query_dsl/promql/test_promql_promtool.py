"""``promtool query instant|range`` (a real client we did not write) prints the same
against Artimon's base URL as against Prometheus, over the same data. Sums across series
are left out: their last digit may differ (docs/promql.md, "Differences")."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from artimon.servers import PrometheusServer
from bookkeeper.ground import BackgroundServer

EXPRESSIONS = [
    "cpu_temp_celsius",
    "max by (job) (rate(http_requests_total[5m]))",
    'histogram_quantile(0.9, sum by (le) (rate(request_duration_seconds_bucket{job="api"}[5m])))',
    "topk(3, http_requests_total)",
    "scalar(sum(up))",
    'count_values("v", up)',
]


def _promtool(*args: str) -> str:
    done = subprocess.run(
        [shutil.which("promtool") or "promtool", "query", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_promtool_prints_the_same(
    expression: str, prometheus: PrometheusServer, artimon: BackgroundServer, promql_dataset: Any
) -> None:
    ours = f"{artimon.url}/prometheus"
    at = str(promql_dataset.end_s - 300)
    instant = [_promtool("instant", f"--time={at}", base, expression) for base in (prometheus.url, ours)]
    assert instant[0] == instant[1] and instant[0].strip()
    window = [f"--start={promql_dataset.end_s - 900}", f"--end={promql_dataset.end_s}", "--step=1m"]
    ranged = [_promtool("range", *window, base, expression) for base in (prometheus.url, ours)]
    assert ranged[0] == ranged[1] and ranged[0].strip()
