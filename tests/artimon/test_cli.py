from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from artimon.arguments.vhms import add_wal_arguments
from artimon.cli import COMMANDS, build_parser, load_command
from artimon.stack import agent_properties, resolutions_for
from bookkeeper import Bookkeeper
from bookkeeper.ground import DirectoryLock
from vhms.server import FSYNC_POLICIES

ARTIMON = [sys.executable, "-m", "artimon"]
FREE_PORTS = ["--api-port", "0", "--zk-port", "0", "--thrift-port", "0"]  # artimon up beside other tests


@contextmanager
def _running(*args: str) -> Iterator[list[str]]:
    """``artimon ARGS`` as a process: yields its output lines, the first one read; on leaving,
    SIGTERM, the rest of the output added and exit code 0 checked (killed if it hangs)."""
    process = subprocess.Popen([*ARTIMON, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    output: list[str] = []
    try:
        assert process.stdout is not None
        output.append(process.stdout.readline().rstrip("\n"))
        yield output
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
        output.extend(out.splitlines())
        assert process.returncode == 0, err
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ARTIMON, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@dataclass(frozen=True)
class DemoRun:
    data: Path
    result: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """``artimon up --demo`` for three one-second rounds on free ports, run to its end, with
    an application that writes .artimon files instead of serving: the pipeline's test reads
    what it left, then the rebuild's test (after it) takes its data directory over."""
    data = tmp_path_factory.mktemp("demo-run")
    (data / "run").mkdir()
    batch = f"{int(time.time() * 1000)} batch.jobs.done{{job=nightly}} 7\n"
    (data / "run" / "batch.artimon").write_text(batch)
    result = subprocess.run(
        [*ARTIMON, "up", "--demo", "--interval", "1", "--rounds", "3", "--data-dir", str(data), *FREE_PORTS],
        capture_output=True,
        text=True,
        timeout=180,
        env={k: v for k, v in os.environ.items() if k != "ARTIMON_ZK"},
    )
    return DemoRun(data, result)


def test_help_lists_every_command() -> None:
    result = _run("--help")
    assert result.returncode == 0
    for name in COMMANDS:
        assert name in result.stdout


# runs artimon's main on each command line of argv (a JSON list of lists), then prints the
# modules loaded by then, per command line, as JSON
_MODULES_AFTER = """
import json, sys
from artimon.cli import main
loaded = {}
for argv in json.loads(sys.argv[1]):
    try:
        main(argv)
    except SystemExit:
        pass
    loaded[" ".join(argv)] = sorted(sys.modules)
print(json.dumps(loaded))
"""
HEAVY = ("pyspark", "matplotlib", "fastapi", "pandas", "uvicorn", "confluent_kafka")


def test_help_imports_no_command_dependency() -> None:
    """``artimon --help`` and each ``artimon <command> --help`` read the command table and
    the command's arguments, never what the command runs (issue 26)."""
    argvs = [["--help"], *([name, "--help"] for name in COMMANDS)]
    result = subprocess.run(
        [sys.executable, "-c", _MODULES_AFTER, json.dumps(argvs)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.splitlines()[-1])
    assert list(loaded) == [" ".join(argv) for argv in argvs]
    for argv, modules in loaded.items():
        heavy = sorted({m.partition(".")[0] for m in modules} & set(HEAVY))
        assert not heavy, f"artimon {argv} imported {heavy}"


def test_every_command_of_the_table_has_a_run() -> None:
    for name in COMMANDS:
        assert callable(load_command(name).run), name


def test_a_commands_help_shows_its_arguments_and_its_description() -> None:
    result = _run("up", "--help")
    assert result.returncode == 0, result.stderr
    assert "--data-dir" in result.stdout and "--wal-fsync" in result.stdout
    assert "Run the embedded stack on this machine" in result.stdout
    jobs = _run("spark", "analyze", "--help")  # a job's own arguments: its module's configure
    assert jobs.returncode == 0 and "--query" in jobs.stdout


def _every_parser() -> dict[str, argparse.ArgumentParser]:
    """Each command's parser, and each Spark job's, filled (as their --help fills them)."""
    parsers = {}
    for name, command in build_parser().commands.items():
        command.format_help()
        parsers[name] = command
        for action in command._actions:  # spark's jobs
            if isinstance(action, argparse._SubParsersAction):
                for job, parser in action.choices.items():
                    parser.format_help()
                    parsers[f"{name} {job}"] = parser
    return parsers


def test_every_option_has_help_and_shows_its_default_and_every_command_an_example() -> None:
    parsers = _every_parser()
    assert len(parsers) == len(COMMANDS) + 6  # spark's 3 jobs, config's push, pull and diff
    for name, parser in parsers.items():
        text = parser.format_help()
        assert "``" not in text and ":class:" not in text and ":func:" not in text, (name, text)
        assert "\nexample" in text, f"artimon {name} --help shows no example"
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            flag = action.option_strings[-1]
            assert action.help, f"artimon {name} {flag} has no help"
            if action.default not in (None, False, [], argparse.SUPPRESS):
                shown = parser._get_formatter()._expand_help(action)
                assert "default" in shown, (
                    f"artimon {name} {flag}: its default {action.default!r} is not shown"
                )


def test_an_unknown_option_gets_its_commands_usage() -> None:
    result = _run("up", "--demo", "--bogus")
    assert result.returncode == 2
    assert (
        result.stderr.startswith("usage: artimon up ") and "unrecognized arguments: --bogus" in result.stderr
    )


def test_the_wal_flags_offer_exactly_the_stores_fsync_policies() -> None:
    parser = argparse.ArgumentParser()
    add_wal_arguments(parser)
    assert "{" + ",".join(FSYNC_POLICIES) + "}" in parser.format_usage()


def test_up_keeps_the_poll_interval_two_hours_by_default() -> None:
    assert resolutions_for(5) == "5s:1440,5m:48,15m:96,1h:72"
    assert resolutions_for(1) == "1s:7200,5m:48,15m:96,1h:72"
    assert resolutions_for(60) == resolutions_for(7) == "60s:120,5m:48,15m:96,1h:72"


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ("5s:0", "resolution '5s:0': step and slots must be positive"),
        ("5x:10", "resolution '5x:10' is not <step>:<slots>[:<aggregate>]"),
        ("7s:10,10s:5", "resolution 10s is not a larger multiple of the finest (7s)"),
        ("5s:10:max", "the finest resolution (5s) keeps the last sample"),
    ],
)
def test_up_refuses_bad_resolutions_as_vhms_does(tmp_path: Path, given: str, error: str) -> None:
    for command, *more in (("up",), ("vhms", "--no-register")):
        result = _run(command, "--resolutions", given, "--data-dir", str(tmp_path / command), *more)
        assert result.returncode == 2 and error in result.stderr, (command, result.stderr)
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "up").exists()  # refused before anything started


@pytest.mark.slow
def test_up_takes_the_stores_resolutions(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ARTIMON_ZK"}
    result = _run(
        *("up", "--no-spark", "--interval", "1", "--rounds", "2", "--resolutions", "1s:120,1m:60:max"),
        *("--data-dir", str(tmp_path), *FREE_PORTS),
        env=env,
    )
    assert result.returncode == 0, result.stderr
    vhms_line = next(line for line in result.stdout.splitlines() if line.startswith("[ready] vhms"))
    assert vhms_line.endswith("finest buckets 1 s kept 2 min (rings 1s:120:last,60s:60:max)"), vhms_line


def test_spark_refuses_a_setting_that_is_not_key_value() -> None:
    result = _run("spark", "--master", "spark://127.0.0.1:7077", "--conf", "spark.executor.memory", "analyze")
    assert result.returncode == 2
    assert "--conf: 'spark.executor.memory' is not KEY=VALUE" in result.stderr


@pytest.mark.slow
def test_up_demo_runs_the_pipeline_into_vhms(demo_run: DemoRun) -> None:
    data, result = demo_run.data, demo_run.result
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    ready = [line.split()[1] for line in lines if line.startswith("[ready]")]
    assert [name for name in ready if name != "spark"] == [
        "zookeeper",
        "vhms",
        "demo",
        "query",
        "dashboard",
        "alerts",
        "agent",
        "status",
    ]
    assert "spark" in ready  # on a thread of its own: when the JVM is up
    vhms_line = next(line for line in lines if line.startswith("[ready] vhms"))
    assert "finest buckets 1 s" in vhms_line  # a bucket per round: never a partial one
    agent_line = next(line for line in lines if line.startswith("[ready] agent"))
    thrift_port = int(re.search(r"Flume Thrift on 127\.0\.0\.1:(\d+)", agent_line).group(1))  # type: ignore[union-attr]
    assert thrift_port > 0
    rounds = [line for line in lines if line.startswith("round ")]
    assert len(rounds) == 3
    assert "4 endpoints polled, 0 failed" in rounds[-1], rounds  # the demo's three, and the agent itself
    assert "ERROR" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert (data / "dashboards" / "demo.json").exists()
    assert lines[-1] == "stopped."
    assert lines[-2].startswith("spark raw_ingest: history up to date")
    history = pd.read_parquet(data / "history" / "parquet")
    assert (history["series"].str.startswith("batch.jobs.done{")).any()  # the .artimon file
    assert (history["series"].str.startswith("flume.EventTakeSuccessCount{")).any()  # the self-report
    assert (data / "alerts.yaml").exists() and (data / "agent.properties").exists()
    requests = history[history["series"].str.startswith("http.requests{")]
    # a sample is stamped when its value was set: the demo's one-second tick may miss a round
    # under load, and that round's unchanged counters are the same samples again (stored once)
    assert len(requests) == 12 * requests["ts"].nunique() > 0  # 12 series at each time
    assert not list((data / "landing").glob("*.avro"))  # processed, then deleted
    assert (data / "vhms" / "default" / "vhms-snapshot.json").exists()  # written on stop
    assert not (data / "zookeeper" / "zookeeper.pid").exists()  # stopped by its PID


@pytest.mark.slow
def test_up_rebuilds_an_empty_vhms_from_the_parquet_history(demo_run: DemoRun) -> None:
    data, first = demo_run.data, demo_run.result
    env = {k: v for k, v in os.environ.items() if k != "ARTIMON_ZK"}
    assert first.returncode == 0, first.stderr
    assert "backfill" not in first.stdout  # nothing to rebuild from yet
    history = pd.read_parquet(data / "history" / "parquet")
    shutil.rmtree(data / "vhms")  # the store's disk lost
    # no demo apps now, nor the .artimon file: whatever VHMS holds comes from the history,
    # rebuilt by Spark on a standalone master and worker of the stack's own
    (data / "run" / "batch.artimon").unlink()
    with open(data / "up.log", "w") as log:  # Spark's chatter: a pipe nobody reads would fill
        process = subprocess.Popen(
            [*ARTIMON, "up", "--cluster", "--interval", "1", "--data-dir", str(data), *FREE_PORTS],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            start_new_session=True,  # its ZooKeeper and Spark JVMs in its group, killed with it
        )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()

    def next_line(starting: str) -> str:
        deadline = time.monotonic() + 180
        while not (line := lines.get(timeout=max(0.1, deadline - time.monotonic()))).startswith(starting):
            pass
        return line

    try:
        assert " 0 series restored" in next_line("[ready] vhms")
        backfill = next_line("[ready] backfill")
        series = history["series"].nunique()
        assert backfill.split()[2] == str(len(history))  # every sample: all within the window
        now = int(backfill.rsplit(", ", 1)[1].split()[0])
        assert now >= series, (backfill, series)  # and the stack's own /metrics, scraped meanwhile
        assert " on spark://127.0.0.1:" in next_line("[ready] spark")
        held = int(next_line("round ").split(" series in VHMS")[0].rsplit(" ", 1)[1])
        assert held >= series
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=180)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            assert process.stdout is not None
            process.stdout.close()
    assert process.returncode == 0, (data / "up.log").read_text()[-3000:]
    with DirectoryLock(data / "spark", "the test"):  # its master and worker have exited
        pass


@pytest.mark.slow
def test_endpoints_and_read_against_a_registered_app(zk_hosts: str) -> None:
    bk = Bookkeeper("cli-test", environ={})
    bk.integer("hits", page="home").set(7)
    server = bk.serve(zk_hosts=zk_hosts, session_timeout=2.0)
    try:
        assert server.registration is not None and server.registration.registered.wait(30)
        listing = _run("endpoints", "--zk", zk_hosts)
        assert listing.returncode == 0, listing.stderr
        assert f"cli-test\t{server.host}:{server.port}\t{server.uuid}" in listing.stdout
        assert "1 endpoint(s)" in listing.stdout
        read = _run("read", f"{server.host}:{server.port}")
        assert read.returncode == 0, read.stderr
        assert " hits{context=cli-test," in read.stdout and read.stdout.rstrip().endswith(" 7")
    finally:
        bk.close()


def test_read_reports_a_bad_address_and_a_dead_endpoint() -> None:
    bad = _run("read", "nonsense")
    assert bad.returncode == 2 and "expected HOST:PORT" in bad.stderr
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = _run("read", f"127.0.0.1:{port}", "--timeout", "2")
    assert dead.returncode == 1 and "connect to" in dead.stderr


def test_zk_command_checks_an_external_ensemble(zk_hosts: str) -> None:
    result = _run("zk", env={"ARTIMON_ZK": zk_hosts})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "answers 'imok'" in result.stdout


@pytest.mark.slow
def test_zk_command_serves_until_ctrl_c(tmp_path) -> None:
    import signal

    from artimon.servers import four_letter_word, free_port

    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "ARTIMON_ZK"}
    process = subprocess.Popen(
        [*ARTIMON, "zk", "--port", str(port), "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready.startswith(f"ZooKeeper ready on 127.0.0.1:{port}"), ready
        assert four_letter_word("127.0.0.1", port, "ruok") == "imok"
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0
    assert "ZooKeeper stopped." in out
    assert four_letter_word("127.0.0.1", port, "ruok", timeout=1) == ""


def test_agent_command_refuses_a_bad_configuration_with_exit_2(tmp_path) -> None:
    conf = tmp_path / "bad.properties"
    conf.write_text("a1.channels = c1\na1.channels.c1.type = memory\na1.channels.c1.capacity = lots\n")
    result = _run("agent", "-f", str(conf), "-n", "a1")
    assert result.returncode == 2
    assert "a1.channels.c1.capacity: 'lots' is not an integer" in result.stderr
    missing = _run("agent", "-f", str(tmp_path / "nope.properties"), "-n", "a1")
    assert missing.returncode == 2 and "nope.properties" in missing.stderr


@pytest.mark.slow
def test_agent_command_runs_serves_metrics_and_stops_on_sigterm(tmp_path) -> None:
    import httpx

    from artimon.servers import free_port

    conf = tmp_path / "agent.properties"
    conf.write_text(
        agent_properties(
            "a1",
            sources={"r1": {"type": "seq", "totalEvents": 50, "channels": "c1"}},
            channels={"c1": {"type": "memory"}},
            sinks={"k1": {"type": "null", "channel": "c1"}},
        )
    )
    port = free_port()
    with _running("agent", "-f", str(conf), "-n", "a1", "--monitor-port", str(port)) as output:
        assert f"metrics on http://127.0.0.1:{port}/metrics" in output[0], output
        deadline = time.monotonic() + 30
        while True:
            body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).json()
            if body["SINK.k1"]["EventDrainSuccessCount"] == 50:
                break
            assert time.monotonic() < deadline, body
            time.sleep(0.05)
    assert any("agent a1 stopped." in line for line in output), output


def test_query_command_prints_a_table_json_and_csv() -> None:
    import numpy as np

    from bookkeeper.ground import BackgroundServer
    from query_dsl import create_app
    from vhms import LocalClient
    from vhms.server import Store

    store = Store()
    now = int(time.time() * 1000) // 60_000 * 60_000
    store.ingest(["temp{rack=r1}", "temp{rack=r2}"], np.array([21.5, 23.0]), np.array([now, now]))
    server = BackgroundServer(create_app(LocalClient(store)), "127.0.0.1", 0)
    server.start()
    try:
        table = _run("query", "--url", server.url, 'fetch("temp", last=2m)')
        assert table.returncode == 0, table.stderr
        lines = table.stdout.splitlines()
        assert lines[0] == "2 series of temp" and lines[1].split()[0] == "rack"
        assert lines[2].split()[0] == "r1" and "21.5" in lines[2] and "23" in lines[3]
        as_json = _run(
            "query", "--url", server.url, "--format", "json", 'reduce(fetch("temp", last=2m), max)'
        )
        assert 23.0 in json.loads(as_json.stdout)[0]["values"]  # a minute may turn meanwhile
        as_csv = _run("query", "--url", server.url, "--format", "csv", 'fetch("temp{rack=r2}", last=2m)')
        assert any(line.endswith(",23.0") for line in as_csv.stdout.splitlines()[1:])
        bad = _run("query", "--url", server.url, "fetch(")
        assert bad.returncode == 1 and "line 1" in bad.stderr
    finally:
        server.stop()


def test_query_table_shows_seconds_under_a_minute_and_says_what_it_left_out() -> None:
    import numpy as np

    from artimon.commands.query import _table
    from query_dsl import Matrix

    start = 1_700_000_040_000  # 22:14:00 UTC
    every_5s = Matrix(["temp"], [{"rack": "r1"}], start + np.arange(12) * 5000, np.ones((1, 12)), 5000)
    lines = _table(every_5s, 8).splitlines()
    assert lines[1].split()[-8:] == [f"22:14:{s:02d}" for s in range(20, 60, 5)]
    assert lines[-1] == "(4 earlier instants not shown: --last N shows more, --format csv all)"
    minutes = Matrix(["temp"], [{"rack": "r1"}], start + np.arange(3) * 60_000, np.ones((1, 3)), 60_000)
    lines = _table(minutes, 8).splitlines()
    assert lines[1].split()[-3:] == ["22:14", "22:15", "22:16"] and "not shown" not in lines[-1]


def test_query_table_shows_the_labels_that_vary_however_long_the_names() -> None:
    """Series whose keys share a long prefix still read apart: the labels that differ are
    columns, what they share is said once."""
    import numpy as np

    from artimon.commands.query import _table
    from query_dsl import Matrix

    labels = [
        {"datacenter": "paris-east-1", "application": "checkout-service-backend", "host": f"h{i}", "path": p}
        for i in (1, 2)
        for p in ("/api/v1/orders", "/api/v1/users")
    ]
    matrix = Matrix(
        ["http.server.requests.duration.seconds.count"] * 4, labels, np.array([0]), np.ones((4, 1)), 60_000
    )
    lines = _table(matrix, 8).splitlines()
    assert lines[0] == (
        "4 series of http.server.requests.duration.seconds.count"
        "{application=checkout-service-backend,datacenter=paris-east-1}"
    )
    assert lines[1].split()[:2] == ["host", "path"]
    assert [line.split()[:2] for line in lines[2:]] == [[lab["host"], lab["path"]] for lab in labels]


def test_failures_are_one_line_not_a_traceback(tmp_path) -> None:
    from artimon.servers import free_port

    unreachable = _run("query", "--url", f"http://127.0.0.1:{free_port()}", 'fetch("x")')
    assert unreachable.returncode == 1 and "does not answer" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr and len(unreachable.stderr.strip().splitlines()) == 1
    with _running("api", "--port", "0", "--vhms", "127.0.0.1:1") as output:
        port = re.search(r"http://127\.0\.0\.1:(\d+)", output[0]).group(1)  # type: ignore[union-attr]
        busy = _run("api", "--port", port, "--vhms", "127.0.0.1:1")
        assert busy.returncode == 2 and f"127.0.0.1:{port}" in busy.stderr, busy.stderr
        assert "Traceback" not in busy.stderr
    import numpy as np

    from bookkeeper.ground import BackgroundServer
    from query_dsl import create_app
    from vhms import LocalClient
    from vhms.server import Store

    store = Store()
    now = int(time.time() * 1000) // 60_000 * 60_000
    keys = [f"wide{{i={i}}}" for i in range(5000)]
    store.ingest(keys, np.arange(5000.0), np.full(5000, now))
    server = BackgroundServer(create_app(LocalClient(store)), "127.0.0.1", 0)
    server.start()
    try:  # far more than a pipe holds, read by a reader that leaves after one byte
        piped = subprocess.run(
            f"{sys.executable} -m artimon query --url {server.url} --format csv 'fetch(\"wide\", last=2m)' "
            "| head -c 1 > /dev/null",
            shell=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.stop()
    assert "Traceback" not in piped.stderr and "BrokenPipe" not in piped.stderr, piped.stderr


@pytest.mark.slow
def test_api_command_serves_saved_dashboards(tmp_path) -> None:
    import httpx

    from artimon.servers import free_port
    from query_dsl.dashboards import EXAMPLES

    missing = _run("api", "--dashboards", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "is not a directory" in missing.stderr
    port = free_port()
    with _running(
        "api", "--port", str(port), "--vhms", "127.0.0.1:1", "--dashboards", str(EXAMPLES)
    ) as output:
        assert f"dashboards at http://127.0.0.1:{port}/" in output[0], output
        listed = httpx.get(f"http://127.0.0.1:{port}/api/v1/dashboards", timeout=10).json()
        assert [d["name"] for d in listed["dashboards"]] == ["artimon", "demo"]
        assert "uPlot" in httpx.get(f"http://127.0.0.1:{port}/", timeout=10).text


def test_agent_check_validates_a_file_as_promtool_does(tmp_path) -> None:
    good = tmp_path / "good.properties"
    good.write_text(
        "a.sources = s\na.channels = c\na.sinks = k\na.sources.s.type = seq\na.sources.s.channels = c\n"
        "a.channels.c.type = memory\na.sinks.k.type = null\na.sinks.k.channel = c\n"
    )
    checked = _run("agent", "--check", "-f", str(good), "-n", "a")
    assert checked.returncode == 0 and "agent a is valid" in checked.stdout and "0 warnings" in checked.stdout
    typo = tmp_path / "typo.properties"
    typo.write_text(good.read_text() + f"a.channels.c.type = file\na.channels.c.dataDir = {tmp_path}/x\n")
    warned = _run("agent", "--check", "-f", str(typo), "-n", "a")
    assert warned.returncode == 0 and "did you mean a.channels.c.dataDirs?" in warned.stdout
    assert not (tmp_path / "x").exists()  # a check creates nothing
    broken = tmp_path / "broken.properties"
    broken.write_text(good.read_text() + "a.sinks.k.channel = nowhere\n")
    failed = _run("agent", "--check", "-f", str(broken), "-n", "a")
    assert failed.returncode == 1 and "nowhere" in failed.stderr


def test_dashboards_check(tmp_path) -> None:
    from query_dsl import EXAMPLES

    good = _run("dashboards", "--check", str(EXAMPLES))
    assert good.returncode == 0 and "demo: ok" in good.stdout and "0 invalid" in good.stdout
    (tmp_path / "bad.json").write_text('{"title": "t", "panels": [{"title": "p", "query": "fetch("}]}')
    (tmp_path / "fine.json").write_text((EXAMPLES / "demo.json").read_text())
    bad = _run("dashboards", "--check", str(tmp_path))
    assert bad.returncode == 1 and "bad: INVALID" in bad.stdout and "fine: ok" in bad.stdout


def test_vhms_and_api_commands_speak_tls(tmp_path, tls_files) -> None:
    import httpx

    from artimon.servers import free_port

    refused = _run("vhms", "--no-register", "--tls-key", str(tls_files.server))
    assert refused.returncode == 2 and "need --tls-cert" in refused.stderr
    unloadable = _run("api", "--vhms", "127.0.0.1:1", "--vhms-ca", str(tmp_path / "none.pem"))
    assert unloadable.returncode == 2 and "none.pem" in unloadable.stderr
    vhms_port, api_port = free_port(), free_port()
    with _running(
        "vhms",
        "--no-register",
        "--port",
        str(vhms_port),
        "--data-dir",
        str(tmp_path / "vhms"),
        "--tls-cert",
        str(tls_files.server),
        "--max-connections-per-peer",
        "4",
    ) as vhms:
        assert f"127.0.0.1:{vhms_port} over TLS" in vhms[0], vhms
        with _running(
            "api", "--port", str(api_port), "--vhms", f"127.0.0.1:{vhms_port}", "--vhms-ca", str(tls_files.ca)
        ):
            answer = httpx.post(
                f"http://127.0.0.1:{api_port}/api/v1/query",
                json={"query": 'fetch("load", last=5m)'},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["series"] == []
