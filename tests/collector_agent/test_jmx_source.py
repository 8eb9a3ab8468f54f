"""The jmx source against a real JVM: a ZooKeeper server started with the Jolokia JVM agent
(resolved from Maven Central), into a real VHMS shard; an MBean that vanishes while it is
collected; Hadoop's /jmx JSON with NaN and Infinity."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from artimon.servers import ZooKeeperServer, free_port, resolve_jars
from artimon.stack import agent_properties
from collector_agent import Agent, Context, load_properties
from collector_agent.registry import resolve
from collector_agent.sources.jmx import mbean_samples, parse_object_name
from vhms.server import Store, VhmsService

Latest = Callable[[VhmsService, str], dict[str, float]]
JOLOKIA = "org.jolokia:jolokia-agent-jvm:2.5.1:javaagent"


def properties(port: int, connection: str, vhms_port: int) -> str:
    """A jmx source on ZooKeeper's Jolokia agent into a VHMS shard."""
    jmx = {
        "type": "jmx",
        "targets": f"127.0.0.1:{port}",
        "job": "zookeeper",
        "interval": 1,
        "scrapeTimeout": 0.9,
        "mbeans.1": "java.lang:type=Memory",
        "mbeans.2": "org.apache.ZooKeeperService:*",
        "mbeans.3": connection,
        "channels": "ch",
    }
    store = {
        "type": "vhms",
        "channel": "ch",
        "servers": f"default@127.0.0.1:{vhms_port}",
        "maxBackoffSleep": 100,
    }
    return agent_properties(
        "a", sources={"jmx": jmx}, channels={"ch": {"type": "memory"}}, sinks={"store": store}
    )


@pytest.fixture(scope="module")
def jolokia_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ZooKeeperServer, int]]:
    """A ZooKeeper JVM with the Jolokia agent on a port of its own."""
    (jar,) = [j for j in resolve_jars("jolokia-2.5.1", [JOLOKIA]) if j.name.endswith("-javaagent.jar")]
    port = free_port()
    server = ZooKeeperServer(
        tmp_path_factory.mktemp("jolokia-zk"), jvm_options=[f"-javaagent:{jar}=host=127.0.0.1,port={port}"]
    ).start()
    try:
        yield server, port
    finally:
        server.stop()


def jolokia(port: int, path: str) -> Any:
    """Jolokia's own answer, once it answers."""
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/jolokia/{path}", timeout=5) as response:
                return json.loads(response.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.slow
def test_jolokia_on_zookeeper_into_vhms_and_an_mbean_that_vanishes(
    jolokia_zk: tuple[ZooKeeperServer, int], tmp_path: Path, wait: Callable[..., None], latest: Latest
) -> None:
    server, port = jolokia_zk
    client = KazooClient(hosts=server.hosts)
    client.start()
    shard = VhmsService(Store(), http_port=None, wal=False)
    shard.start(register=False)
    agent = None
    try:
        (connection,) = jolokia(port, "search/org.apache.ZooKeeperService:name1=Connections,*")["value"]
        agent = Agent.from_properties(properties(port, connection, shard.port), "a", {})
        agent.start()
        source = agent.sources["jmx"]
        instance = f"instance=127.0.0.1:{port}"
        wait(lambda: latest(shard, "jmx.java.lang.HeapMemoryUsage.max"), timeout=30, what="the heap in VHMS")
        own = jolokia(port, "read/java.lang:type=Memory")["value"]
        assert latest(shard, "jmx.java.lang.HeapMemoryUsage.max") == {
            f"jmx.java.lang.HeapMemoryUsage.max{{{instance},job=zookeeper,type=Memory}}": own[
                "HeapMemoryUsage"
            ]["max"]
        }
        tree = latest(shard, "jmx.org.apache.ZooKeeperService.NodeCount")
        (key,) = tree
        assert re.search(r"name0=StandaloneServer_port\d+,name1=InMemoryDataTree", key)
        assert tree[key] >= 4  # /, /zookeeper and its quota and config nodes
        # the client's connection MBean is read while it lives
        wait(
            lambda: latest(shard, "jmx.org.apache.ZooKeeperService.PacketsReceived{name1=Connections}"),
            what="it",
        )
        assert source.metrics()["MBeanMissingCount"] == 0

        client.stop()  # its connection MBean goes
        client.close()
        wait(
            lambda: source.metrics()["MBeanMissingCount"] >= 2, timeout=20, what="the vanished MBean counted"
        )
        rounds = source.metrics()["RoundCount"]
        wait(lambda: source.metrics()["RoundCount"] > rounds + 1, what="another round")
        assert set(latest(shard, "up{job=zookeeper}").values()) == {1.0}  # the other MBeans still read
        assert source.target_errors == {}
        assert source.metrics()["ScrapeFailCount"] == 0
    finally:
        if agent is not None:
            agent.stop()
        shard.stop()
        client.stop()
        client.close()


# Hadoop's JMXJsonServlet writes NaN and infinities bare (Jackson's non-standard numbers)
HADOOP_JMX = b"""{
  "beans" : [ {
    "name" : "Hadoop:service=NameNode,name=FSNamesystemState",
    "modelerType" : "org.apache.hadoop.hdfs.server.namenode.FSNamesystem",
    "CapacityTotal" : 1000000,
    "FSState" : "Operational",
    "BlocksTotal" : 12,
    "FsLockQueueLength" : NaN,
    "TopUserOpCounts" : "{}",
    "Ratio" : Infinity
  }, {
    "name" : "Hadoop:service=NameNode,name=JvmMetrics",
    "modelerType" : "JvmMetrics",
    "tag.Context" : "jvm",
    "MemHeapUsedM" : 43.5,
    "GcInfo" : {"count" : 3, "live" : true}
  } ]
}"""


def test_hadoop_jmx_json_with_nan_and_infinity() -> None:
    answer = json.loads(HADOOP_JMX)
    beans = {
        bean["name"]: {k: v for k, v in bean.items() if k not in ("name", "modelerType")}
        for bean in answer["beans"]
    }
    samples, skipped = mbean_samples(beans, "jmx.", re.compile(".*"))
    assert samples == [
        ("jmx.Hadoop.CapacityTotal", {"service": "NameNode", "name": "FSNamesystemState"}, 1000000.0),
        ("jmx.Hadoop.BlocksTotal", {"service": "NameNode", "name": "FSNamesystemState"}, 12.0),
        ("jmx.Hadoop.MemHeapUsedM", {"service": "NameNode", "name": "JvmMetrics"}, 43.5),
        ("jmx.Hadoop.GcInfo.count", {"service": "NameNode", "name": "JvmMetrics"}, 3.0),
        ("jmx.Hadoop.GcInfo.live", {"service": "NameNode", "name": "JvmMetrics"}, 1.0),
    ]
    assert len(skipped) == 2 and "FsLockQueueLength is nan" in skipped[0] and "Ratio is inf" in skipped[1]
    only_heap, _ = mbean_samples(beans, "", re.compile("Mem.*"))
    assert [name for name, _, _ in only_heap] == ["Hadoop.MemHeapUsedM"]


def test_object_names() -> None:
    assert parse_object_name("java.lang:type=GarbageCollector,name=G1 Young Generation") == (
        "java.lang",
        {"type": "GarbageCollector", "name": "G1 Young Generation"},
    )
    assert parse_object_name('a:k="x,\\"y",z=1') == ("a", {"k": 'x,"y', "z": "1"})


def test_the_scrape_examples_of_the_docs_configure() -> None:
    """The ``prometheus``, ``jmx`` and ``prometheus_remote_write`` examples of docs/agent.md
    are configurations these sources accept, with every key known."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "agent.md").read_text()
    blocks = [
        b
        for b in re.findall(r"```properties\n(.*?)```", page, re.S)
        if "type = jmx" in b or "type = prometheus" in b  # whole sources, not the key fragments
    ]
    types = []
    for block in blocks:
        values = load_properties(block)
        for name in sorted({key.split(".")[2] for key in values if key.startswith("a1.sources.")}):
            prefix = f"a1.sources.{name}."
            context = Context(
                {k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)}, prefix
            )
            source = resolve("source", context.get_str("type"), f"{prefix}type")(name)
            source.configure(context)
            assert context.unknown_keys() == []
            types.append(context.get_str("type"))
    assert sorted(types) == ["jmx", "jmx", "prometheus", "prometheus_remote_write"]
