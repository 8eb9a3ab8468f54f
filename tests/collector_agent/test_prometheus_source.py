"""The prometheus source against Debian's node exporter, Spark's own PrometheusServlet and
targets that misbehave (real HTTP servers), into a real VHMS shard; its parser against
thousands of random bodies."""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient

from artimon.stack import agent_properties
from bookkeeper import resolve_zk
from collector_agent import Agent, ScrapeError
from collector_agent.sources.exposition import ExpositionParser
from vhms.server import Store, VhmsService

Latest = Callable[[VhmsService, str], dict[str, float]]

SCRAPE = {
    "type": "prometheus",
    "interval": 1,
    "scrapeTimeout": 0.8,
    "bodySizeLimit": 4194304,
    "channels": "ch",
}

OPENMETRICS_BODY = """\
# TYPE requests counter
requests_total{path="/a"} 7
requests_created{path="/a"} 1.7e9
# TYPE latency histogram
latency_bucket{le="0.1"} 2
latency_bucket{le="0.5"} 5
latency_bucket{le="+Inf"} 6
latency_sum 1.25
latency_count 6
latency_created 1.7e9
# TYPE rpc summary
rpc{quantile="0.99"} 0.3
rpc_sum 4
rpc_count 10
# TYPE temperature gauge
temperature{room="a b}c"} 21.5
# EOF
"""

BAD_BODIES: dict[str, tuple[str, bytes]] = {
    "/garbage": ("text/plain", bytes(range(256)) * (10 * 1024 * 1024 // 256)),  # 10 MB
    "/long-line": ("text/plain", b'a{x="' + b"y" * 1024 * 1024 + b'"} 1\n'),
    "/bad-utf8": ("text/plain", b'a{x="\xff\xfe"} 1\n'),
    "/duplicate": ("text/plain", b'a{x="1"} 1\nb 2\na{x="1"} 3\n'),
    "/status": ("text/plain", b"no"),
    "/gzip-bomb": ("text/plain", gzip.compress(b"a 1\n" * (5 * 1024 * 1024))),  # 20 MB once decoded
}

PATHS = ("/good", "/hang", "/refused-sample", *BAD_BODIES)


class Targets:
    """Real HTTP endpoints: a good OpenMetrics one, bad ones, one that hangs, one that
    serves a sample our label rules refuse."""

    def __init__(self) -> None:
        self.release = threading.Event()
        release = self.release

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/hang":
                    release.wait(60)
                    return
                if self.path == "/good":
                    kind, body = (
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        OPENMETRICS_BODY,
                    )
                    self._answer(200, kind, body.encode())
                elif self.path == "/refused-sample":
                    self._answer(200, "text/plain", b'ok 1\nctl{x="a\\nb"} 2\n')
                elif self.path in BAD_BODIES:
                    kind, raw = BAD_BODIES[self.path]
                    self._answer(500 if self.path == "/status" else 200, kind, raw)
                else:
                    self._answer(404, "text/plain", b"")

            def _answer(self, status: int, kind: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                if self.path == "/gzip-bomb":
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the scraper gave up on it (the size limit)
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 64
            daemon_threads = True

        # a server per path: each target its own instance (host:port), as in a real site
        self.servers = {path: Server(("127.0.0.1", 0), Handler) for path in PATHS}
        for server in self.servers.values():
            threading.Thread(target=server.serve_forever, daemon=True).start()

    def port(self, path: str) -> int:
        return int(self.servers[path].server_address[1])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port(path)}{path}"

    def stop(self) -> None:
        self.release.set()
        for server in self.servers.values():
            server.shutdown()
            server.server_close()


@pytest.fixture(scope="module")
def targets() -> Iterator[Targets]:
    served = Targets()
    yield served
    served.stop()


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VhmsService]:
    service = VhmsService(Store(), http_port=None, wal=False)
    service.start(register=False)
    yield service
    service.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(url: str, timeout: float = 30.0) -> str:
    """The target's own text, once it answers."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return str(response.read().decode())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def exposed(text: str, pattern: str) -> float:
    """The value of the one line of ``text`` that ``pattern`` matches (the target's own)."""
    (line,) = [line for line in text.splitlines() if re.match(pattern, line)]
    return float(line.rsplit(" ", 1)[1])


def run_agent(scrape: dict[str, object], shard: VhmsService, **more_sources: dict[str, object]) -> Agent:
    """An agent of the source ``scrape`` (``SCRAPE`` with these keys) and ``more_sources``
    into ``shard``."""
    properties = agent_properties(
        "a",
        sources={"scrape": {**SCRAPE, **scrape}, **more_sources},
        channels={"ch": {"type": "memory", "capacity": 10000}},
        sinks={
            "store": {
                "type": "vhms",
                "channel": "ch",
                "servers": f"default@127.0.0.1:{shard.port}",
                "timeout": 5,
                "maxBackoffSleep": 100,
            }
        },
    )
    agent = Agent.from_properties(properties, "a", {})
    agent.start()
    return agent


@pytest.mark.slow
def test_node_exporter_and_bad_targets_into_vhms(
    targets: Targets, shard: VhmsService, wait: Callable[..., None], latest: Latest
) -> None:
    port = free_port()
    exporter = subprocess.Popen(
        [
            "prometheus-node-exporter",
            f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults",
            "--collector.meminfo",
            "--collector.cpu",
            "--collector.loadavg",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    bad = ["/hang", *BAD_BODIES, "/refused-sample"]
    agent = None
    try:
        own_text = answers(f"http://127.0.0.1:{port}/metrics")
        urls = [f"127.0.0.1:{port}", targets.url("/good"), *(targets.url(p) for p in bad)]
        agent = run_agent({"targets": urls, "job": "node"}, shard)
        source = agent.sources["scrape"]

        def ups() -> dict[str, float]:
            return latest(shard, 'up{job="node"}')

        wait(lambda: len(ups()) == len(urls), timeout=30, what="up of every target in VHMS")
        wait(lambda: source.metrics()["RoundCount"] >= 2, timeout=10, what="two rounds")
        by_instance = {re.search(r"instance=([^,}]+)", k).group(1): v for k, v in ups().items()}  # type: ignore[union-attr]
        assert by_instance[f"127.0.0.1:{port}"] == 1.0
        assert list(by_instance.values()).count(1.0) == 3  # node, good, refused-sample
        errors = source.target_errors  # type: ignore[attr-defined]
        assert "scrape timeout" in errors[targets.url("/hang")]
        assert "over the limit" in errors[targets.url("/garbage")]
        assert "longer than the limit" in errors[targets.url("/long-line")]
        assert "not UTF-8" in errors[targets.url("/bad-utf8")]
        assert "two samples of the series a{" in errors[targets.url("/duplicate")]
        assert "HTTP status 500" in errors[targets.url("/status")]
        assert "over the limit of 4194304 bytes" in errors[targets.url("/gzip-bomb")]  # decoded bytes
        assert all(source.target_failures[targets.url(p)] >= 1 for p in bad[:-1])  # type: ignore[attr-defined]
        assert source.metrics()["SampleRefusedCount"] >= 1

        # the exporter's series, cross-checked against its own text
        instance = f"instance=127.0.0.1:{port}"
        total = latest(shard, "node_memory_MemTotal_bytes")
        assert total == {
            f"node_memory_MemTotal_bytes{{{instance},job=node}}": exposed(
                own_text, "node_memory_MemTotal_bytes "
            )
        }
        cpu = latest(shard, 'node_cpu_seconds_total{mode="idle"}')
        assert len(cpu) == len(
            re.findall(r'^node_cpu_seconds_total\{cpu="\d+",mode="idle"\}', own_text, re.M)
        )
        assert all(
            re.fullmatch(rf"node_cpu_seconds_total\{{cpu=\d+,{instance},job=node,mode=idle}}", k) for k in cpu
        )
        samples = latest(shard, 'scrape_samples_scraped{job="node"}')
        assert samples[f"scrape_samples_scraped{{{instance},job=node}}"] > 50

        # OpenMetrics: counter, histogram, summary, gauge; _created left out
        good = f"instance=127.0.0.1:{targets.port('/good')},job=node"
        assert latest(shard, "requests_total") == {f"requests_total{{{good},path=/a}}": 7.0}
        assert latest(shard, "~latency_.*") == {
            f"latency_bucket{{{good},le=0.1}}": 2.0,
            f"latency_bucket{{{good},le=0.5}}": 5.0,
            f"latency_bucket{{{good},le=+Inf}}": 6.0,
            f"latency_sum{{{good}}}": 1.25,
            f"latency_count{{{good}}}": 6.0,
        }
        assert latest(shard, "rpc")[f"rpc{{{good},quantile=0.99}}"] == 0.3
        assert latest(shard, "temperature") == {f"temperature{{{good},room=a%20b%7Dc}}": 21.5}
        assert latest(shard, "~.*_created") == {}
        assert latest(shard, "ok") == {
            f"ok{{instance=127.0.0.1:{targets.port('/refused-sample')},job=node}}": 1.0
        }
    finally:
        if agent is not None:
            agent.stop()
        exporter.kill()
        exporter.wait()


SPARK_APP = """
import sys
from spark_jobs.session import spark_session
session = spark_session("local[1]", "scraped", conf={
    "spark.ui.enabled": "true",
    "spark.ui.port": sys.argv[1],
    "spark.ui.prometheus.enabled": "true",
    "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
    "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
    "spark.driver.memory": "512m",
})
session.range(1000).count()
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.slow
@pytest.mark.spark
def test_spark_prometheus_servlet_into_vhms(
    tmp_path: Path, shard: VhmsService, wait: Callable[..., None], latest: Latest
) -> None:
    port = free_port()
    app = subprocess.Popen(
        [sys.executable, "-c", SPARK_APP, str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    agent = None
    try:
        assert app.stdout is not None
        assert app.stdout.readline().strip() == "ready"
        driver = answers(f"http://127.0.0.1:{port}/metrics/prometheus/")
        executors = answers(f"http://127.0.0.1:{port}/metrics/executors/prometheus")
        # one job per servlet: both answer on the driver's host:port (one instance)
        agent = run_agent(
            {"targets": f"http://127.0.0.1:{port}/metrics/prometheus", "job": "spark"},
            shard,
            executors={
                "type": "prometheus",
                "interval": 1,
                "targets": f"http://127.0.0.1:{port}/metrics/executors/prometheus",
                "job": "spark-executors",
                "channels": "ch",
            },
        )
        wait(lambda: len(latest(shard, "up{job~spark.*}")) == 2, timeout=30, what="both servlets scraped")
        assert set(latest(shard, "up{job~spark.*}").values()) == {
            1.0
        }  # the redirect to a trailing slash followed

        name = re.search(r"^(metrics_local_\d+_driver_BlockManager_memory_maxMem_MB_Value)\{", driver, re.M)
        assert name is not None
        instance = f"instance=127.0.0.1:{port}"
        assert latest(shard, name.group(1)) == {
            f"{name.group(1)}{{{instance},job=spark,type=gauges}}": exposed(driver, re.escape(name.group(1)))
        }
        cores = latest(shard, "metrics_executor_totalCores")
        (key,) = cores
        assert cores[key] == exposed(executors, "metrics_executor_totalCores") == 1.0
        assert (
            "application_name=scraped" in key and "executor_id=driver" in key and "job=spark-executors" in key
        )
        assert latest(shard, "spark_info")  # spark_info{version=..., revision=...} 1.0
    finally:
        if agent is not None:
            agent.stop()
        for pipe in (app.stdin, app.stdout):
            if pipe is not None:
                pipe.close()
        app.terminate()
        try:
            app.wait(30)
        except subprocess.TimeoutExpired:
            app.kill()
            app.wait()


def test_targets_discovered_in_zookeeper(
    targets: Targets, shard: VhmsService, zk_hosts: str, wait: Callable[..., None], latest: Latest
) -> None:
    connect, layout = resolve_zk(zk_hosts)
    zk = KazooClient(hosts=connect)
    zk.start()
    agent = None
    try:
        zk.create(
            f"{layout.root}/targets/discovered/one",
            json.dumps({"url": targets.url("/good"), "labels": {"team": "a"}}).encode(),
            makepath=True,
        )
        agent = run_agent({"zk": zk_hosts}, shard)
        wait(
            lambda: latest(shard, 'requests_total{job="discovered"}'),
            timeout=20,
            what="the discovered target",
        )
        (key,) = latest(shard, 'requests_total{job="discovered"}')
        assert "team=a" in key
        zk.create(f"{layout.root}/targets/discovered/127.0.0.1:1", b"")  # refuses connections
        wait(lambda: latest(shard, 'up{job="discovered",instance="127.0.0.1:1"}'), timeout=20, what="its up")
        assert set(latest(shard, 'up{job="discovered",instance="127.0.0.1:1"}').values()) == {0.0}
    finally:
        if agent is not None:
            agent.stop()
        zk.stop()
        zk.close()


class ClosingKeptAlive:
    """A target that keeps a connection alive after its first answer and closes it, with no
    answer, when the next request comes on it: the race of an idle timeout equal to the
    scrape interval, made to happen every round."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/metrics"

    def _serve(self) -> None:
        with contextlib.suppress(OSError):  # the listener closed: the test is over
            while True:
                conn, _ = self.listener.accept()
                self.connections += 1
                threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    @staticmethod
    def _one(conn: socket.socket) -> None:
        body = b"ok 1\n"
        with conn, contextlib.suppress(OSError):
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096) or b"\r\n\r\n"
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            conn.recv(4096)  # the next request on the kept-alive connection: closed unanswered


def test_a_connection_closed_as_the_scrape_goes_out_is_retried_on_a_fresh_one(
    shard: VhmsService, wait: Callable[..., None]
) -> None:
    target = ClosingKeptAlive()
    agent = run_agent({"targets": [target.url], "job": "race"}, shard)
    try:
        source = agent.sources["scrape"]
        wait(lambda: source.metrics()["ScrapeSuccessCount"] >= 4, timeout=30, what="four scrapes")
        metrics = source.metrics()
        assert metrics["ScrapeFailCount"] == 0
        assert metrics["ScrapeRetryCount"] >= 3  # every round after the first met a closed connection
        assert target.connections >= 4
    finally:
        agent.stop()
        target.listener.close()


def test_honor_labels_and_exported_labels() -> None:
    body = b'm{job="app",instance="x",path="/"} 1\n'
    own = ExpositionParser({"job": "scrape", "instance": "h:1"}, honor_labels=False, max_line=1024)
    batch = own.parse(body, "text/plain", "scrape", 0).batch
    assert batch.series_keys() == ["m{exported_instance=x,exported_job=app,instance=h:1,job=scrape,path=/}"]
    honored = ExpositionParser({"job": "scrape", "instance": "h:1"}, honor_labels=True, max_line=1024)
    assert honored.parse(body, "text/plain", "scrape", 0).batch.series_keys() == [
        "m{instance=x,job=app,path=/}"
    ]


def test_known_shape_skips_the_parser_of_record_and_a_new_one_does_not() -> None:
    parser = ExpositionParser({}, honor_labels=False, max_line=1024)
    first = b'# TYPE m counter\nm{a="1"} 1\nm{a="2"} 2\n'
    parser.parse(first, "text/plain", "c", 0)
    again = parser.parse(first.replace(b"} 2", b"} 5"), "text/plain", "c", 0)
    assert parser.full_parses == 1
    assert again.batch.numeric_values().tolist() == [1.0, 5.0]
    grown = first + b'm{a="3"} 3\n'
    parser.parse(grown, "text/plain", "c", 0)
    assert parser.full_parses == 2
    with pytest.raises(ScrapeError, match="not a number"):  # the known shape, a value refused
        parser.parse(grown.replace(b"} 3", b"} x"), "text/plain", "c", 0)
    assert parser.full_parses == 2


# -- random bodies --------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b_total", "c_bucket", "d:e", "x_sum", "x_count", "_u"])
LABEL_VALUES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6).map(
    lambda s: s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
)
VALUES = st.one_of(
    st.floats(allow_nan=True)
    .map(repr)
    .map(lambda v: {"inf": "+Inf", "-inf": "-Inf", "nan": "NaN"}.get(v, v)),
    st.sampled_from(["1", "-0", "x", "1_0", "", "0x1f", "1e400"]),
)


@st.composite
def lines(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["sample", "sample", "sample", "type", "help", "blank", "junk"]))
    name = draw(NAMES)
    if kind == "type":
        kinds = ["counter", "gauge", "histogram", "summary", "untyped", "x"]
        return f"# TYPE {name} {draw(st.sampled_from(kinds))}"
    if kind == "help":
        return f"# HELP {name} {draw(st.text(max_size=5))}"
    if kind == "blank":
        return draw(st.sampled_from(["", " ", "\t"]))
    if kind == "junk":
        return draw(st.text(max_size=12))
    keys = draw(st.lists(st.sampled_from(["k", "le", "quantile", "job", "z"]), max_size=3, unique=True))
    labels = ",".join(f'{k}="{draw(LABEL_VALUES)}"' for k in keys)
    stamp = draw(st.sampled_from(["", " 1700000000000", " x"]))
    return (
        f"{name}{{{labels}}} {draw(VALUES)}{stamp}"
        if keys or draw(st.booleans())
        else f"{name} {draw(VALUES)}"
    )


BODIES = st.one_of(
    st.lists(lines(), max_size=12).map("\n".join),
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", "replace")),
)


def outcome(parser: ExpositionParser, body: bytes, kind: str) -> object:
    try:
        scrape = parser.parse(body, kind, "c", 0)
    except ScrapeError as exc:
        return ("refused", type(exc))
    scrape.batch.validate()
    assert len(scrape.batch) <= scrape.exposed
    return (scrape.batch.series_keys(), scrape.batch.numeric_values().tobytes(), scrape.refused)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=BODIES,
    second=BODIES,
    kind=st.sampled_from(["text/plain; version=0.0.4", "application/openmetrics-text; version=1.0.0"]),
    raw=st.binary(max_size=64),
)
def test_random_bodies_are_read_or_refused_the_same_cold_or_warm(
    first: str, second: str, kind: str, raw: bytes
) -> None:
    """Any body is a batch or a ScrapeError, never another exception; a parser that has seen
    an earlier body answers a later one exactly as a fresh parser does (the shape cache is
    invisible); raw bytes, UTF-8 or not, fail cleanly."""
    warm = ExpositionParser({"job": "j"}, honor_labels=False, max_line=64)
    outcome(warm, first.encode(), kind)
    outcome(warm, raw, kind)
    assert outcome(warm, second.encode(), kind) == outcome(
        ExpositionParser({"job": "j"}, False, 64), second.encode(), kind
    )
    # the same shape again, values changed: read by the fast path, as a fresh parser reads it
    changed = re.sub(r" (\d+)$", r" 9\1", second, flags=re.M)
    assert outcome(warm, changed.encode(), kind) == outcome(
        ExpositionParser({"job": "j"}, False, 64), changed.encode(), kind
    )


def test_a_body_of_more_samples_than_the_limit_is_refused_before_it_is_parsed() -> None:
    """A 30 MB body of 5-byte lines would make 6 million samples, 7 GB of the parser's
    objects: refused from a count of its lines, within milliseconds and a few MB."""
    body = b"".join(b"a%d 1\n" % i for i in range(10)) * 600_000
    parser = ExpositionParser({"job": "j"}, honor_labels=False, max_line=1024, sample_limit=200_000)
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(ScrapeError, match="6,000,000 lines that are not comments, more than sampleLimit"):
            parser.parse(body, "text/plain", "c", 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 2 and peak < 2.5 * len(body)  # the decoded text, no more
    comments = b"#\n" * 800_001  # 800,001 strings, 64 MB of objects, if split
    with pytest.raises(ScrapeError, match="800,001 lines, more than 4 x sampleLimit"):
        parser.parse(comments, "text/plain", "c", 0)
    fits = b"# HELP a A.\n# TYPE a gauge\n" + b"".join(b'a{i="%d"} 1\n' % i for i in range(1000))
    small = ExpositionParser({"job": "j"}, honor_labels=False, max_line=1024, sample_limit=1000)
    assert small.parse(fits, "text/plain", "c", 0).exposed == 1000


def test_refused_samples_are_counted_by_reason_and_explained_once() -> None:
    long = "x" * 1100
    body = "".join(f'm{{a="{long}{i}"}} 1\n{"n" * 300}{i} 2\nok{{i="{i}"}} 3\n' for i in range(500))
    parser = ExpositionParser({"job": "j"}, honor_labels=False, max_line=4096)
    scrape = parser.parse(body.encode(), "text/plain", "c", 0)
    assert scrape.refused_by == {"InvalidLabels": 500, "InvalidName": 500} and scrape.refused == 1000
    assert "label 'a' value" in scrape.refusal and len(scrape.batch.names) == 1
    again = parser.parse(body.replace("} 3", "} 4").encode(), "text/plain", "c", 0)  # the known shape
    assert again.refused_by == scrape.refused_by and again.refusal == scrape.refusal
    assert parser.full_parses == 1
