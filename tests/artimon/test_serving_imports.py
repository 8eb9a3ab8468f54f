"""A VHMS shard and a query API import only what they serve (issue 27): neither loads pyarrow,
pandas, Spark, the agent, the Avro, YAML, bcrypt or HTTP-client libraries, whether at start
or after serving an ingest, a fetch and DSL and PromQL answers, wide ones too (docs/vhms.md §
Start-up). Having served, neither has a malloc arena per thread
(``keep_freed_memory_returnable``: docs/promql.md § Memory)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
from support import ALLOCATORS_PROBE, Lines

from bookkeeper.wire import IngestColumns
from vhms import VhmsClient

# what neither server uses: each is a package or module prefix of sys.modules
UNNEEDED = (
    "pyarrow",
    "pandas",
    "pyspark",
    "spark_jobs",
    "collector_agent",
    "query_dsl.alerts",
    "fastavro",
    "httpx",
    "rich",
    "yaml",
    "bcrypt",
    "matplotlib",
    "confluent_kafka",
)
# ``artimon`` as its console script runs it, writing the process's modules and allocators at exit
MAIN = ALLOCATORS_PROBE + (
    "import atexit, json, os, sys\n"
    "def report():\n"
    "    open(os.environ['MODULES_FILE'], 'w').write('\\n'.join(sys.modules))\n"
    "    open(os.environ['ALLOCATORS_FILE'], 'w').write(json.dumps(allocators()))\n"
    "atexit.register(report)\n"
    "from artimon.cli import main\n"
    "sys.exit(main())\n"
)


# the malloc arenas of a process that imported the serving commands and started no thread of its own
_ARENAS_OF_IMPORTS = json.loads(
    subprocess.run(
        [
            sys.executable,
            "-c",
            ALLOCATORS_PROBE
            + "import json, artimon.commands.api, artimon.commands.vhms\nprint(json.dumps(allocators()))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
)["arenas"]


def _unneeded(modules: list[str]) -> list[str]:
    return sorted({u for u in UNNEEDED for m in modules if m == u or m.startswith(u + ".")})


# a store and a query app built in one process, wide answers written (more cells than
# query_dsl.promql.small_body's: the columnar writers), then what it imported
WIDE_ANSWERS = """
import json, sys, time
import numpy as np
import artimon.commands.api, artimon.commands.vhms
from bookkeeper.ground import keep_freed_memory_returnable
from bookkeeper.wire import IngestColumns
from query_dsl import create_app
from query_dsl.http import encode_answer
from query_dsl.promql import instant_query, range_query
from vhms import LocalClient
from vhms.server import Store

keep_freed_memory_returnable()
store = Store("60s:60")
now = int(time.time()) // 60 * 60_000
keys = [f"served_total{{host=h{i},rack=r{i % 3}}}" for i in range(6000)]
for minute in range(5):
    at = np.full(6000, now - (4 - minute) * 60_000)
    assert store.ingest_columns(IngestColumns.from_keys(keys, np.full(6000, 1.5 * minute), at)) == 6000
source = LocalClient(store)
create_app(source)
vector = json.loads(bytes(instant_query(source, "served_total", now / 1000).to_prometheus_body()))
matrix = range_query(source, "served_total", now / 1000 - 240, now / 1000, 60)
series = json.loads(bytes(matrix.to_prometheus_body()))["result"]
dsl = json.loads(encode_answer(matrix.value, 1.0))["series"]
print(json.dumps({"sizes": [len(vector["result"]), len(series), len(dsl)], "modules": list(sys.modules)}))
"""


def test_a_store_and_a_query_app_that_wrote_wide_answers_imported_no_pyarrow_nor_pandas() -> None:
    result = subprocess.run([sys.executable, "-c", WIDE_ANSWERS], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["sizes"] == [6000, 6000, 6000]
    assert _unneeded(found["modules"]) == []


def test_the_serving_commands_import_nothing_they_do_not_serve() -> None:
    statement = (
        "import json, sys, artimon.commands.api, artimon.commands.vhms; print(json.dumps(list(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", statement], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert _unneeded(json.loads(result.stdout)) == []


@contextmanager
def _serving(tmp_path: Path, name: str, *args: str) -> Iterator[tuple[Lines, list[str]]]:
    """``artimon ARGS``'s output lines as it runs; on leaving, SIGTERM, exit code 0 checked,
    the list yielded filled with the modules the process had imported, and its allocators
    checked as they were at its exit."""
    modules_file, allocators_file = tmp_path / f"{name}.modules", tmp_path / f"{name}.allocators"
    environment = {**os.environ, "MODULES_FILE": str(modules_file), "ALLOCATORS_FILE": str(allocators_file)}
    with subprocess.Popen(
        [sys.executable, "-c", MAIN, *args], stdout=subprocess.PIPE, text=True, env=environment
    ) as process:
        modules: list[str] = []
        try:
            yield Lines(process.stdout), modules
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 0
            modules.extend(modules_file.read_text().split())
            # its threads (the Thrift server's, the query pool's) made no arena of their own
            assert json.loads(allocators_file.read_text()) == {
                "arenas": _ARENAS_OF_IMPORTS,
                "arrow_pool": None,
            }
        finally:
            if process.poll() is None:
                process.kill()


def test_a_shard_and_an_api_that_served_imported_no_pandas_nor_anything_unneeded(tmp_path: Path) -> None:
    shard_args = ["vhms", "--no-register", "--no-wal", "--port=0", "--http-port=0", f"--data-dir={tmp_path}"]
    with _serving(tmp_path, "vhms", *shard_args) as (shard_out, shard_modules):
        ready = shard_out.until(lambda line: "serving" in line, timeout=120, what="the shard serving")
        port = int(re.search(r"on 127\.0\.0\.1:(\d+)", ready).group(1))  # type: ignore[union-attr]
        now = int(time.time() * 1000)
        keys = [f"served_total{{host=h{i},rack=r{i % 3}}}" for i in range(30)]
        with VhmsClient("127.0.0.1", port) as client:
            assert client.ingest(IngestColumns.from_keys(keys, np.ones(30), np.full(30, now))) == (30, 0)
            assert client.fetch("served_total", now - 600_000, now).values.shape[0] == 30
        with _serving(tmp_path, "api", "api", f"--vhms=127.0.0.1:{port}", "--port=0") as (
            api_out,
            api_modules,
        ):
            ready = api_out.until(lambda line: "query API on" in line, timeout=120, what="the API serving")
            url = re.search(r"on (http://\S+) ", ready).group(1)  # type: ignore[union-attr]
            dsl = {"query": 'fetch("served_total", last=10m) | reduce(sum, by=[rack])'}
            assert len(httpx.post(f"{url}/api/v1/query", json=dsl, timeout=60).json()["series"]) == 3
            promql = {"query": "sum by (rack) (served_total)"}
            answer = httpx.get(f"{url}/prometheus/api/v1/query", params=promql, timeout=60).json()
            assert sorted(float(r["value"][1]) for r in answer["data"]["result"]) == [10.0, 10.0, 10.0]
    assert _unneeded(shard_modules) == []
    assert _unneeded(api_modules) == []
