"""Apache Flume 1.11.0's SDK ``RpcClient`` (its default Avro client with deflate, its failover
and load-balancing clients) sending to our Avro sources, every event counted on our side:
0 lost, 0 duplicated, headers and bodies byte-identical; with failover, one of two ``artimon
agent`` processes killed with -9 mid-run and restarted: still 0 lost, and duplicates only
as at-least-once allows (counted and printed).

The client is ``flume_client/RpcSend.java``, compiled here with ``javac`` against Flume's
jars: ``RpcSend <client.properties> <events> <batch>`` sends event ``n`` with the headers
``n`` and ``tag`` and the body :func:`body`, a batch it fails to deliver again on a new
client, and prints ``sent <events> retried <batches>``."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import unstamped, wait_until

from artimon.servers import flume_jars, free_port
from artimon.stack import agent_properties
from artimon.testing import start_agent_process
from collector_agent import Agent, Event

pytestmark = pytest.mark.slow

EVENTS = 100_000
BATCH = 1000
SOURCE = Path(__file__).with_name("flume_client") / "RpcSend.java"
_MEMORY = {"type": "memory", "capacity": 4 * EVENTS, "transactionCapacity": 10_000, "keep-alive": 0}
_SENT = "sent {} retried "


def body(n: int) -> bytes:
    """RpcSend's body of event ``n``."""
    return bytes((n * 31 + i) & 0xFF for i in range(1 + n % 200))


@pytest.fixture(scope="module")
def rpc_send(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command that runs RpcSend, compiled into a temporary directory."""
    if shutil.which("javac") is None:
        pytest.skip("no javac")
    classes = tmp_path_factory.mktemp("rpc_send")
    classpath = os.pathsep.join(str(jar) for jar in flume_jars())
    subprocess.run(["javac", "-d", str(classes), "-cp", classpath, str(SOURCE)], check=True, timeout=120)
    return ["java", "-Xmx256m", "-cp", f"{classes}{os.pathsep}{classpath}", "RpcSend"]


def send(rpc_send: list[str], tmp_path: Path, client: dict[str, object], events: int = EVENTS) -> str:
    """Run RpcSend with ``client`` as its properties to the end: its output."""
    done = subprocess.run(
        [*rpc_send, str(write_client(tmp_path, client)), str(events), str(BATCH)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def write_client(tmp_path: Path, client: dict[str, object]) -> Path:
    path = tmp_path / "client.properties"
    path.write_text("".join(f"{key} = {value}\n" for key, value in client.items()), encoding="utf-8")
    return path


def collector(name: str, **source: object) -> Agent:
    """An agent of ours in this process: an Avro source into a memory channel (drained by
    the test)."""
    avro = {"type": "avro", "bind": "127.0.0.1", "port": 0, "channels": "ch", **source}
    agent = Agent.from_properties(
        agent_properties(
            name,
            sources={"src": avro},
            channels={"ch": _MEMORY, "unused": {"type": "memory"}},
            sinks={"k": {"type": "null", "channel": "unused"}},
        ),
        name,
        {},
    )
    agent.start()
    return agent


@pytest.fixture
def agents() -> Iterator[list[Agent]]:
    started: list[Agent] = []
    yield started
    for agent in reversed(started):
        agent.stop()


def drain(agent: Agent) -> list[Event]:
    taken: list[Event] = []
    while True:
        with agent.channels["ch"].transaction() as tx:
            batch = tx.take_batch(10_000)
        if not batch:
            return taken
        taken += batch


def counted(got: list[Event]) -> Counter[int]:
    """How many times each event came, each checked byte for byte against what RpcSend sent."""
    times: Counter[int] = Counter()
    for event in got:
        n = int(event.headers["n"])
        assert unstamped(event.headers, event.body) == {"n": str(n), "tag": "välue-ß"}, n
        assert event.body == body(n), n
        times[n] += 1
    return times


def test_the_default_avro_client_with_deflate(
    tmp_path: Path, rpc_send: list[str], agents: list[Agent]
) -> None:
    ours = collector("d", **{"compression-type": "deflate"})
    agents.append(ours)
    client = {
        "client.type": "default",
        "hosts": "h1",
        "hosts.h1": f"127.0.0.1:{ours.sources['src'].port}",
        "batch-size": BATCH,
        "compression-type": "deflate",
        "compression-level": 6,
    }
    assert _SENT.format(EVENTS) + "0" in send(rpc_send, tmp_path, client)
    times = counted(drain(ours))
    assert sorted(times) == list(range(EVENTS)) and set(times.values()) == {1}
    counts = ours.sources["src"].metrics()
    assert counts["BadFrameCount"] == counts["RequestRefusedCount"] == 0


def test_the_load_balancing_client_over_two_agents(
    tmp_path: Path, rpc_send: list[str], agents: list[Agent]
) -> None:
    agents += [collector("l1"), collector("l2")]
    client = {
        "client.type": "default_loadbalance",
        "hosts": "h1 h2",
        "hosts.h1": f"127.0.0.1:{agents[0].sources['src'].port}",
        "hosts.h2": f"127.0.0.1:{agents[1].sources['src'].port}",
        "host-selector": "round_robin",
        "batch-size": BATCH,
    }
    assert _SENT.format(EVENTS) + "0" in send(rpc_send, tmp_path, client)
    each = [counted(drain(agent)) for agent in agents]
    assert all(len(times) >= EVENTS // 4 for times in each), [len(times) for times in each]
    times = each[0] + each[1]
    assert sorted(times) == list(range(EVENTS)) and set(times.values()) == {1}


def wait_for_line(lines: queue.Queue[str], prefix: str, timeout: float) -> None:
    """Read ``lines`` (a process's output, line by line) until one starts with ``prefix``."""
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while not (seen and seen[-1].startswith(prefix)):
        try:
            seen.append(lines.get(timeout=max(0.0, deadline - time.monotonic())))
        except queue.Empty:
            raise AssertionError(f"no line {prefix!r} in {timeout} s; the output: {''.join(seen)}") from None


def relay_properties(root: Path, port: int, downstream: int) -> str:
    """``artimon agent`` ``r``: an Avro source on ``port`` into a file channel, an Avro sink
    to ``downstream``."""
    return agent_properties(
        "r",
        sources={"src": {"type": "avro", "bind": "127.0.0.1", "port": port, "channels": "c"}},
        channels={"c": {"type": "file", "dataDirs": root / "channel", "minimumRequiredSpace": 1048576}},
        sinks={
            "k": {
                "type": "avro",
                "hostname": "127.0.0.1",
                "port": downstream,
                "batch-size": BATCH,
                "channel": "c",
            }
        },
    )


class Relay:
    """One ``artimon agent`` process of :func:`relay_properties`, its metrics on a port."""

    def __init__(self, root: Path, downstream: int) -> None:
        root.mkdir()
        self.port, self.monitor = free_port(), free_port()
        self.config = root / "agent.properties"
        self.config.write_text(relay_properties(root, self.port, downstream))
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> Relay:
        self.process = start_agent_process(self.config, "r", monitor_port=self.monitor)
        return self

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.communicate(timeout=30)
        self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.communicate()
            self.process = None

    def channel_size(self) -> int:
        url = f"http://127.0.0.1:{self.monitor}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(json.loads(answer.read(1 << 20))["CHANNEL.c"]["ChannelSize"])


@pytest.fixture
def relays() -> Iterator[list[Relay]]:
    started: list[Relay] = []
    yield started
    for relay in started:
        relay.stop()


def test_the_failover_client_over_two_agent_processes_one_killed_and_restarted(
    tmp_path: Path, rpc_send: list[str], agents: list[Agent], relays: list[Relay]
) -> None:
    terminal = collector("t")
    agents.append(terminal)
    downstream = terminal.sources["src"].port
    relays += [Relay(tmp_path / "r1", downstream).start(), Relay(tmp_path / "r2", downstream).start()]
    client = {
        "client.type": "default_failover",
        "hosts": "h1 h2",
        "hosts.h1": f"127.0.0.1:{relays[0].port}",
        "hosts.h2": f"127.0.0.1:{relays[1].port}",
        "max-attempts": 2,
        "batch-size": BATCH,
        "request-timeout": 5000,
    }
    quarter = str(EVENTS // 4)  # RpcSend waits there: h1 dies with the client mid-stream
    command = [*rpc_send, str(write_client(tmp_path, client)), str(EVENTS), str(BATCH), "0", quarter]
    sender = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in sender.stdout or ()], daemon=True)
    reader.start()
    try:
        wait_for_line(lines, "paused", timeout=120)
        relays[0].kill()  # h1, the failover client's first host
        assert sender.stdin is not None
        sender.stdin.write("go\n")
        sender.stdin.close()
        accepted = terminal.sources["src"].metrics
        half = EVENTS // 2  # h1 got at most a quarter: the rest came through h2
        wait_until(lambda: accepted()["EventAcceptedCount"] >= half, timeout=300, what="failover to h2")
        relays[0].start()
        sender.wait(timeout=300)
    finally:
        if sender.poll() is None:
            sender.kill()
            sender.wait()
        reader.join(timeout=30)
        assert sender.stdout is not None
        sender.stdout.close()
    output = "".join(lines.queue)
    assert sender.returncode == 0 and _SENT.format(EVENTS) in output, output
    wait_until(lambda: all(relay.channel_size() == 0 for relay in relays), timeout=120, what="relays drained")
    times = counted(drain(terminal))
    duplicates = sum(times.values()) - EVENTS
    print(f"failover: {EVENTS} events, {duplicates} duplicates, {output.strip().splitlines()[-1]}")
    assert sorted(times) == list(range(EVENTS))
    # a batch the client sent to the killed agent, and one its sink had sent on, at most
    assert duplicates <= 2 * BATCH and max(times.values()) <= 3
