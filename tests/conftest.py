"""Shared fixtures: one real ZooKeeper server per test session (or ``$ARTIMON_ZK``), one
SparkSession per test session on a standalone master and worker (started by the first test
that asks: its JVMs take about 15 s), waiting on a condition with a deadline, a corpus
of regexes that make backtracking engines explode (the store's and the query API's
hardening tests), ``artimon up``'s default ports and the machine's network namespaces, and
the pytest-xdist groups (below). What tests import by name lives in ``support.py``.

The README's command runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup``),
each a session of its own with its own session fixtures. A test that takes something only one
worker may hold runs on one worker, in an ``xdist_group`` given by the fixtures it uses
(:data:`XDIST_GROUPS`), so no test file names a group: the session's Spark, HDFS and Kafka
clusters (started once, not once per worker: they are most of the suite's memory), ``artimon
up``'s default ports, the machine's one site of network namespaces. The other tests go to
whichever worker is free."""

from __future__ import annotations

import os
import signal
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from support import TlsFiles, wait_until

from artimon.servers import SparkCluster, ZooKeeperServer, spark_kafka_conf
from artimon.site import unavailable_reason

# fixture -> the xdist group of every test that uses it (directly or through another fixture)
XDIST_GROUPS = {
    "spark": "clusters",
    "hdfs": "clusters",
    "history_root": "clusters",  # a root on the session's HDFS (getfixturevalue: not in fixturenames)
    "spark_cluster": "clusters",
    "kafka": "clusters",
    "default_ports": "default-ports",
    "netns": "site",
}
DEFAULT_PORTS = {"ZooKeeper": 2181, "the query API": 8080, "the Flume Thrift source": 4141}


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C reaches the processes the tests start, as it does a user's: a suite started in
    the background of a non-interactive shell inherits SIGINT ignored, and so would every
    Python process it starts (Python installs its Ctrl-C handler only over the default), so
    that a test's Ctrl-C to an application would go unheard."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test that uses a fixture of :data:`XDIST_GROUPS` joins its group (one at most)."""
    for item in items:
        groups = {XDIST_GROUPS[name] for name in getattr(item, "fixturenames", ()) if name in XDIST_GROUPS}
        if len(groups) > 1:
            raise pytest.UsageError(f"{item.nodeid} uses fixtures of two xdist groups: {sorted(groups)}")
        for group in groups:
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """On a worker of ``--dist loadgroup``, pytest-xdist tells its scheduler a test's group by
    appending ``@<group>`` to its id; where it cannot (pytest 9.2's node ids, pytest-xdist
    issue 1386) it ignores the groups without a word, so the grouped tests fail instead."""
    grouped = item.get_closest_marker("xdist_group") is not None
    if grouped and getattr(item.config.option, "loadgroup", False) and "@" not in item.nodeid:
        pytest.fail("pytest-xdist dropped this test's xdist_group: its scheduler would split the group")


@pytest.fixture(scope="module")
def default_ports() -> None:
    """``artimon up``'s default ports, free: the README's and the docs' commands address them."""
    for what, port in DEFAULT_PORTS.items():
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                pytest.fail(f"port {port} is taken: artimon up runs {what} there by default, as the docs do")


@pytest.fixture
def netns() -> None:
    """This machine's network namespaces, for a site (:mod:`artimon.site`): the test is skipped
    where it cannot make them (not root, no ``ip netns``). One site at a time per machine."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer | None]:
    """A ZooKeeper server on a free port (tick 500 ms: sessions may time out in 1 s),
    stopped by its PID at the end; ``None`` when ``$ARTIMON_ZK`` names an ensemble."""
    if os.environ.get("ARTIMON_ZK"):
        yield None
        return
    server = ZooKeeperServer(Path(tmp_path_factory.mktemp("zookeeper")), tick_time_ms=500)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_hosts(zk_server: ZooKeeperServer | None) -> str:
    """A connect string with a root of its own, so tests never see each other's znodes."""
    connect = zk_server.hosts if zk_server else os.environ["ARTIMON_ZK"].partition("/")[0]
    return f"{connect}/artimon-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def wait() -> Callable[..., None]:
    return wait_until


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The session's SparkSession, started by the first test that asks: its jobs run on a
    standalone master and worker of their own from the pyspark wheel, as a cluster runs
    them (executors in their own JVM, their own Python workers); ``ARTIMON_TEST_SPARK=local``
    runs them on ``local[2]`` instead. Its class path has Spark's Kafka connector
    (``raw_ingest --kafka``)."""
    from spark_jobs.session import spark_session  # pyspark's import is slow: only when asked

    if os.environ.get("ARTIMON_TEST_SPARK", "cluster") == "local":
        session = spark_session("local[2]", "artimon-tests", conf=spark_kafka_conf())
        yield session
        session.stop()
        return
    cluster = SparkCluster(tmp_path_factory.mktemp("spark"), worker_cores=2, worker_memory="3g").start()
    try:
        conf = {"spark.executor.memory": "2g", **spark_kafka_conf()}
        session = spark_session(cluster.master_url, "artimon-tests", conf=conf)
        try:
            yield session
        finally:
            session.stop()
    finally:
        cluster.stop()


# Known catastrophic patterns for backtracking engines: nested and overlapping quantifiers,
# overlapping alternations, counted repeats of them, and a DFA that explodes (linear in RE2
# too, but costly: the store's max_select_s is what bounds that one).
REDOS_CORPUS = (
    "(a+)+$",
    "(a+)+b",
    "(a*)*b",
    "(a|aa)+b",
    "(a|a?)+b",
    "(.*a){20}",
    "(x+x+)+y",
    "(.+)+(.+)+Z",
    "((a+)+)+c",
    "(a|b|ab)*c",
    "([a-z]+)*!$",
    "(\\w+\\s?)+$",
    "^(a+)+$",
    "(.*){1,500}[bc]",
    "[abcd]*a[abcd]{14}(.*){1,900}",
    "(a{1,30}){1,30}b",
    "[ab]*a[ab]{20}",
)


@pytest.fixture(scope="session")
def redos_corpus() -> tuple[str, ...]:
    return REDOS_CORPUS


def redos_values(count: int) -> list[str]:
    """Label values that make a backtracking engine try every split of them: runs of a (of
    x, of ab, of words) that almost match the corpus, then fail at the end."""
    out = []
    for i in range(count):
        run = 24 + i % 8
        shapes = ("a" * run + "!", "x" * run, "ab" * (run // 2) + "d", "word " * (run // 5) + "!")
        out.append(shapes[i % 4] + str(i))
    return out


@pytest.fixture(scope="session")
def redos_label_values() -> Callable[[int], list[str]]:
    return redos_values


@st.composite
def regexes(draw: st.DrawFn) -> str:
    """Small regexes over a, b, x and '.', nested quantifiers and alternations: the shapes
    that make backtracking explode."""
    atoms = st.sampled_from(["a", "b", "x", ".", "[ab]", "\\w", "a?", "(a|aa)", "(a|a?)"])
    quantifiers = st.sampled_from(["", "*", "+", "?", "{2,5}", "{1,20}"])

    def grow(depth: int) -> str:
        if depth == 0 or draw(st.booleans()):
            return draw(atoms) + draw(quantifiers)
        parts = [grow(depth - 1) for _ in range(draw(st.integers(1, 3)))]
        joined = "|".join(parts) if draw(st.booleans()) else "".join(parts)
        return f"({joined}){draw(quantifiers)}"

    return grow(4) + draw(st.sampled_from(["", "$", "!", "Z", "b"]))


@pytest.fixture(scope="session")
def redos_regexes() -> st.SearchStrategy[str]:
    return regexes()


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    import trustme  # the test extra

    directory = tmp_path_factory.mktemp("tls")
    ca, other = trustme.CA(), trustme.CA()
    files = TlsFiles(
        directory / "ca.pem", directory / "server.pem", directory / "client.pem", directory / "other.pem"
    )
    ca.cert_pem.write_to_path(str(files.ca))
    other.cert_pem.write_to_path(str(files.other_ca))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(files.server))
    ca.issue_cert("agent@example.net").private_key_and_cert_chain_pem.write_to_path(str(files.client))
    return files
