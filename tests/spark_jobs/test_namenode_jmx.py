"""The ``jmx`` source against a live Hadoop daemon's ``/jmx`` servlet: the session HDFS's
NameNode, read with the docs' example configuration, cross-checked against the servlet's
own answer."""

from __future__ import annotations

from collections.abc import Callable

from support import latest_values

from bookkeeper.testing import HdfsServer
from collector_agent import Agent
from vhms.server import Store, VhmsService

AGENT = """
a.sources = nn
a.channels = ch
a.sinks = store
a.sources.nn.type = jmx
a.sources.nn.protocol = hadoop
a.sources.nn.targets = {url}/jmx
a.sources.nn.job = namenode
a.sources.nn.interval = 1
a.sources.nn.mbeans.fs = Hadoop:service=NameNode,name=FSNamesystem
a.sources.nn.attributes = (Capacity|Blocks|Files).*
a.sources.nn.namePrefix = hdfs.
a.sources.nn.channels = ch
a.channels.ch.type = memory
a.sinks.store.type = vhms
a.sinks.store.channel = ch
a.sinks.store.servers = default@127.0.0.1:{vhms_port}
a.sinks.store.maxBackoffSleep = 100
"""


def test_the_namenode_servlet_into_vhms(hdfs: HdfsServer, wait: Callable[..., None]) -> None:
    shard = VhmsService(Store(), http_port=None, wal=False)
    shard.start(register=False)
    agent = Agent.from_properties(AGENT.format(url=hdfs.webhdfs, vhms_port=shard.port), "a", {})
    agent.start()
    try:

        def latest(name: str) -> dict[str, float]:
            return latest_values(shard, name)

        wait(lambda: latest("hdfs.Hadoop.FilesTotal"), timeout=30, what="the NameNode's files in VHMS")
        own = hdfs.jmx("FSNamesystem")
        ((key, files),) = latest("hdfs.Hadoop.FilesTotal").items()
        assert "job=namenode" in key and "service=NameNode" in key and "name=FSNamesystem" in key, key
        assert files == own["FilesTotal"] >= 1  # the root directory at least
        assert latest("hdfs.Hadoop.CapacityTotal")  # (Capacity|Blocks|Files).*, and nothing else:
        assert not latest("hdfs.Hadoop.NumLiveDataNodes")
        assert list(latest("up{job=namenode}").values()) == [1.0]
    finally:
        agent.stop()
        shard.stop()
