"""The PromQL compliance run, set up from nothing: Prometheus's official compliance tester
against Artimon's ``/prometheus`` API, with Artimon fed by a real Prometheus's remote write.

    python benchmarks/promql_compliance.py [--wait 85] [--scrape-interval 5]

1. Tools, through the Go module proxy into ``~/.cache/artimon/go/bin``: ``go install`` of
   ``github.com/prometheus/compliance/promql/cmd/promql-compliance-tester`` and
   ``github.com/juliusv/prometheus_demo_service``; ``go mod download`` of the compliance
   module for its ``promql-test-queries.yml`` (``--tester``, ``--demo-service`` and
   ``--queries`` give them instead).
2. Three demo services on free ports of 127.0.0.1 (the tester's queries name
   ``demo.promlabs.com:10000..10002``: they are rewritten to those ports, as the tester's
   README says to do).
3. Artimon, in this process: a VHMS whose finest ring is the scrape interval, an agent whose
   ``prometheus_remote_write`` source feeds a memory channel drained by the vhms sink, and
   the query API (``/prometheus`` included) over that VHMS.
4. A real Prometheus (Debian's) scraping the demo services every ``--scrape-interval``
   seconds and remote-writing every sample to the agent.
5. After ``--wait`` minutes (the tester's range queries end 12 minutes ago and span 10, and
   its windows reach 1h back: 85 minutes for every case to see full data), the tester runs
   with Prometheus as its reference and Artimon as its target; its summary (``Total: N / M
   (P%) passed``) and every failing case are printed, and its text output is kept in
   ``benchmarks/results/promql_compliance.txt``.

Without the Go tools (a proxy that refuses these modules), ``--builtin`` runs the same
pipeline with ``prometheus-node-exporter`` and Prometheus's own metrics as targets and a
comparison of our own (:data:`BUILTIN_QUERIES`, range queries through both HTTP APIs over
the tester's window: same series, values within the tester's tolerance): a stand-in that
says how remote-written data answers, not the official score.

Every process started here dies with this one; nothing outside the temporary directory and
the Go cache is written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from artimon.servers import PrometheusServer, free_port
from artimon.stack import agent_properties
from bookkeeper.ground import BackgroundServer, spawn
from collector_agent import Agent
from query_dsl import Limits, create_app
from vhms import LocalClient
from vhms.server import Store, VhmsService

TESTER = "github.com/prometheus/compliance/promql/cmd/promql-compliance-tester"
DEMO = "github.com/juliusv/prometheus_demo_service"
COMPLIANCE_MODULE = "github.com/prometheus/compliance/promql"
GO_BIN = Path.home() / ".cache" / "artimon" / "go" / "bin"
RESULTS = Path(__file__).with_name("results")


def agent_config(vhms_port: int) -> str:
    """A remote-write receiver into the VHMS shard on ``vhms_port``, at the samples' own times."""
    return agent_properties(
        "c",
        sources={
            "prom": {"type": "prometheus_remote_write", "bind": "127.0.0.1", "port": 0, "channels": "ch"}
        },
        channels={"ch": {"type": "memory", "capacity": 10000, "transactionCapacity": 1000}},
        sinks={
            "vhms": {
                "type": "vhms",
                "channel": "ch",
                "servers": f"default@127.0.0.1:{vhms_port}",
                "time": "sample",
                "batchSize": 1000,
            }
        },
    )


PROMETHEUS = """
global:
  scrape_interval: {interval}s
  evaluation_interval: {interval}s
scrape_configs:
{jobs}
remote_write:
  - url: "{url}"
    queue_config:
      batch_send_deadline: 1s
"""

# The stand-in's queries: the tester's kinds (selectors, offsets, aggregations, binary
# operators, range functions, histograms) over node-exporter's and Prometheus's own series.
BUILTIN_QUERIES = [
    "prometheus_http_requests_total",
    'prometheus_http_requests_total{handler="/metrics"}',
    'prometheus_http_requests_total{handler=~"/api/.*"}',
    'prometheus_http_requests_total{code!="200"}',
    "prometheus_http_requests_total offset 1m",
    "sum(prometheus_http_requests_total)",
    "sum by (handler) (prometheus_http_requests_total)",
    "count without (handler) (prometheus_http_requests_total)",
    "max(node_cpu_seconds_total)",
    "topk(3, node_cpu_seconds_total)",
    "bottomk(2, node_memory_MemFree_bytes)",
    "quantile(0.9, node_cpu_seconds_total)",
    "avg by (mode) (node_cpu_seconds_total)",
    "stddev(node_cpu_seconds_total)",
    'count_values("v", node_cpu_seconds_total > 0)',
    "rate(node_cpu_seconds_total[1m])",
    "rate(prometheus_http_requests_total[5m])",
    "irate(node_cpu_seconds_total[1m])",
    "increase(prometheus_tsdb_head_samples_appended_total[2m])",
    "delta(node_memory_MemFree_bytes[1m])",
    "idelta(node_memory_MemFree_bytes[1m])",
    "deriv(node_memory_MemFree_bytes[2m])",
    "changes(node_memory_MemFree_bytes[5m])",
    "resets(node_cpu_seconds_total[5m])",
    "avg_over_time(node_load1[1m])",
    "max_over_time(node_load1[5m])",
    "min_over_time(node_load1[5m])",
    "count_over_time(node_load1[1m])",
    "last_over_time(node_load1[1m])",
    "quantile_over_time(0.5, node_load1[5m])",
    "stddev_over_time(node_load1[5m])",
    "timestamp(node_load1)",
    "node_memory_MemFree_bytes / node_memory_MemTotal_bytes * 100",
    "node_memory_MemFree_bytes > bool 1e9",
    'sum by (le) (rate(prometheus_http_request_duration_seconds_bucket{handler="/metrics"}[5m]))',
    "histogram_quantile(0.9, sum by (le) (rate(prometheus_http_request_duration_seconds_bucket[5m])))",
    "abs(deriv(node_load1[2m]))",
    "clamp_max(node_load1, 0.5)",
    "round(node_load5, 0.1)",
    "absent(nonexistent_metric)",
    'label_replace(up, "port", "$1", "instance", ".*:(.*)")',
    "up == 1",
    "up and on(job) up",
    "sum(rate(node_cpu_seconds_total[1m])) by (mode) / on() group_left sum(rate(node_cpu_seconds_total[1m]))",
    "rate(node_cpu_seconds_total[5m:15s])",
    "scalar(sum(up))",
    "vector(1) + time() * 0",
]


def go_install(package: str) -> Path:
    """``go install package@latest`` into :data:`GO_BIN`; the binary's path."""
    GO_BIN.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["go", "install", f"{package}@latest"],
        env={**os.environ, "GOBIN": str(GO_BIN), "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode:
        raise RuntimeError(f"go install {package}@latest failed:\n{done.stderr.strip()}")
    return GO_BIN / package.rsplit("/", 1)[-1]


def test_queries() -> Path:
    """``promql-test-queries.yml`` of the compliance module (``go mod download``)."""
    done = subprocess.run(
        ["go", "mod", "download", "-json", f"{COMPLIANCE_MODULE}@latest"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    answer = json.loads(done.stdout or "{}")
    if done.returncode or "Dir" not in answer:
        raise RuntimeError(
            f"go mod download {COMPLIANCE_MODULE} failed: {answer.get('Error') or done.stderr}"
        )
    return Path(answer["Dir"]) / "promql-test-queries.yml"


@contextmanager
def artimon(scrape_interval: int, slots: int) -> Iterator[tuple[Agent, BackgroundServer]]:
    """VHMS (finest ring = the scrape interval), the agent with its remote-write source, the
    query API: what Prometheus writes to and the tester reads."""
    store = Store(f"{scrape_interval}s:{slots}")
    vhms = VhmsService(store, http_port=None, snapshot_dir=None, wal=False)
    vhms.start(register=False)
    agent = Agent.from_properties(agent_config(vhms.port), "c", {})
    agent.start()
    api = BackgroundServer(create_app(LocalClient(store), limits=Limits(timeout_s=60)), name="compliance-api")
    api.start()
    try:
        yield agent, api
    finally:
        api.stop()
        agent.stop()
        vhms.stop()


def start_targets(stack: ExitStack, work: Path, demo: Path | None) -> tuple[str, dict[str, str]]:
    """The scrape jobs (YAML) and the host renames the queries need."""
    renames: dict[str, str] = {}
    if demo is not None:
        targets = []
        for index in range(3):
            port = free_port()
            log = open(work / f"demo-{index}.log", "ab")  # noqa: SIM115 - closed by the stack
            stack.callback(log.close)
            process = spawn([str(demo), f"-listen-address=127.0.0.1:{port}"], stdout=log, stderr=log)
            stack.callback(process.kill)
            targets.append(f"127.0.0.1:{port}")
            renames[f"demo.promlabs.com:{10000 + index}"] = f"127.0.0.1:{port}"
        return f"  - job_name: demo\n    static_configs:\n      - targets: {json.dumps(targets)}\n", renames
    port = free_port()
    log = open(work / "node-exporter.log", "ab")  # noqa: SIM115 - closed by the stack
    stack.callback(log.close)
    process = spawn(
        ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log
    )
    stack.callback(process.kill)
    return f"  - job_name: node\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n", renames


def range_query(base: str, query: str, start: float, end: float, step: float) -> dict[str, Any]:
    params = urllib.parse.urlencode({"query": query, "start": start, "end": end, "step": step})
    try:
        with urllib.request.urlopen(f"{base}/api/v1/query_range?{params}", timeout=120) as answer:
            result: dict[str, Any] = json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        result = json.loads(exc.read() or b"{}")
    return result


def _close(a: str, b: str) -> bool:
    """The tester's comparison of two sample values: equal, both NaN, or within 1e-5 relative."""
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y or abs(x - y) <= 1e-5 * max(abs(x), abs(y))


def compare(expected: dict[str, Any], got: dict[str, Any]) -> str | None:
    """Why two answers differ (``None`` when they agree)."""
    if expected.get("status") != got.get("status"):
        return f"status {got.get('status')} ({got.get('error')}), Prometheus {expected.get('status')}"
    if expected.get("status") != "success":
        return None
    mine = {json.dumps(s["metric"], sort_keys=True): s["values"] for s in got["data"]["result"]}
    theirs = {json.dumps(s["metric"], sort_keys=True): s["values"] for s in expected["data"]["result"]}
    if set(mine) != set(theirs):
        missing, extra = sorted(set(theirs) - set(mine))[:2], sorted(set(mine) - set(theirs))[:2]
        return f"series differ: missing {missing}, extra {extra}"
    for key, values in theirs.items():
        if [t for t, _ in values] != [t for t, _ in mine[key]]:
            return f"{key}: timestamps differ ({len(values)} points at Prometheus, {len(mine[key])} here)"
        for (t, want), (_, have) in zip(values, mine[key], strict=True):
            if not _close(want, have):
                return f"{key} at {t}: {have}, Prometheus {want}"
    return None


def builtin(reference: str, target: str, end: float) -> tuple[int, list[tuple[str, str]]]:
    """The stand-in comparison over the tester's window (10 minutes ending at ``end``, step 10 s)."""
    failing = []
    for query in BUILTIN_QUERIES:
        why = compare(
            range_query(reference, query, end - 600, end, 10), range_query(target, query, end - 600, end, 10)
        )
        if why is not None:
            failing.append((query, why))
    return len(BUILTIN_QUERIES), failing


def run_tester(
    tester: Path, queries: Path, renames: dict[str, str], work: Path, reference: str, target: str
) -> int:
    text = queries.read_text()
    for old, new in renames.items():
        text = text.replace(old, new)
    (work / "queries.yml").write_text(text)
    (work / "targets.yml").write_text(
        f"reference_target_config:\n  query_url: '{reference}'\n"
        f"test_target_config:\n  query_url: '{target}'\n"
    )
    done = subprocess.run(
        [
            str(tester),
            f"-config-file={work / 'queries.yml'}",
            f"-config-file={work / 'targets.yml'}",
            "-query-parallelism=4",
        ],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "promql_compliance.txt").write_text(done.stdout + done.stderr)
    print(done.stdout)
    summary = re.search(r"Total: .*", done.stdout + done.stderr)
    print(
        summary[0]
        if summary
        else f"no summary; the tester exited with {done.returncode}:\n{done.stderr[-2000:]}"
    )
    return 0 if summary else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--wait", type=float, default=85.0, help="minutes of data before the tester runs (85)"
    )
    parser.add_argument("--scrape-interval", type=int, default=5, help="seconds; also VHMS's finest ring (5)")
    parser.add_argument("--tester", type=Path, help="a promql-compliance-tester binary (else go install)")
    parser.add_argument(
        "--demo-service", type=Path, help="a prometheus_demo_service binary (else go install)"
    )
    parser.add_argument("--queries", type=Path, help="promql-test-queries.yml (else go mod download)")
    parser.add_argument(
        "--builtin", action="store_true", help="the stand-in comparison, without the Go tools"
    )
    args = parser.parse_args(argv)
    tester = demo = queries = None
    if not args.builtin:
        try:
            tester = args.tester or go_install(TESTER)
            demo = args.demo_service or go_install(DEMO)
            queries = args.queries or test_queries()
        except RuntimeError as exc:
            print(
                f"promql_compliance: {exc}\n(--builtin runs the stand-in comparison without them)",
                file=sys.stderr,
            )
            return 2
    slots = int((args.wait + 30) * 60 / args.scrape_interval)
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="promql-compliance-")))
        agent, api = stack.enter_context(artimon(args.scrape_interval, slots))
        source = agent.sources["prom"]
        jobs, renames = start_targets(stack, work, demo)
        port = free_port()
        if demo is None:  # the stand-in also scrapes Prometheus itself
            jobs += f"  - job_name: prometheus\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        config = PROMETHEUS.format(interval=args.scrape_interval, jobs=jobs, url=source.url)
        prometheus = stack.enter_context(PrometheusServer(work / "prometheus", port, config=config))
        reference, target = prometheus.url, f"{api.url}/prometheus"
        print(
            f"Prometheus {reference} -> remote write {source.url} -> VHMS -> {target}; "
            f"waiting {args.wait:g} min for data",
            flush=True,
        )
        deadline = time.monotonic() + args.wait * 60
        while time.monotonic() < deadline:
            time.sleep(min(60.0, max(0.0, deadline - time.monotonic())))
            metrics = source.metrics()
            print(
                f"  {metrics['EventAcceptedCount']:.0f} samples accepted, "
                f"{metrics['RequestRefusedCount']:.0f} requests refused",
                flush=True,
            )
        if tester is not None and queries is not None:
            return run_tester(tester, queries, renames, work, reference, target)
        total, failing = builtin(reference, target, time.time() - 120)
        passed = total - len(failing)
        for query, why in failing:
            print(f"FAIL {query}\n     {why}")
        print(f"Stand-in total: {passed} / {total} ({100 * passed / total:.2f}%) passed")
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "promql_compliance_builtin.json").write_text(
            json.dumps({"passed": passed, "total": total, "failing": failing}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
