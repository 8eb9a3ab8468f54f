"""A VHMS shard and a query API import only what they serve (issue 27): neither loads pandas,
Spark, the agent, the Avro, YAML, bcrypt or HTTP-client libraries, whether at start or
after serving an ingest, a fetch and DSL and PromQL answers (docs/vhms.md § Start-up). Having
served, neither has a malloc arena per thread, and pyarrow allocates from the C heap
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


# the malloc arenas of a process that imported pyarrow and started no thread of its own
_ARENAS_OF_IMPORTS = json.loads(
    subprocess.run(
        [sys.executable, "-c", ALLOCATORS_PROBE + "import json\nprint(json.dumps(allocators()))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
)["arenas"]


def _unneeded(modules: list[str]) -> list[str]:
    return sorted({u for u in UNNEEDED for m in modules if m == u or m.startswith(u + ".")})


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
                "arrow_pool": "system",
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
    assert "pyarrow" in shard_modules and "pyarrow" in api_modules  # both converted with it
    assert _unneeded(shard_modules) == []
    assert _unneeded(api_modules) == []


def test_pyarrow_kept_from_pandas_still_converts_and_loads_pandas_when_asked() -> None:
    script = (
        "import sys, pyarrow as pa\n"
        "from bookkeeper.ground import keep_pandas_out_of_pyarrow\n"
        "keep_pandas_out_of_pyarrow()\n"
        "assert pa.array(['a', 'b'], pa.large_string()).to_pylist() == ['a', 'b']\n"
        "assert 'pandas' not in sys.modules\n"
        "assert pa.table({'x': [1, 2]}).to_pandas()['x'].sum() == 3\n"
        "import pandas as pd\n"
        "assert pa.array(pd.Categorical(['x', 'y'])).type == pa.dictionary(pa.int8(), pa.string())\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
