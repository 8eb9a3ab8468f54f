"""The ``jmx`` source against a live Hadoop daemon's ``/jmx`` servlet: the session HDFS's
NameNode, read with the docs' example configuration, cross-checked against the servlet's
own answer."""

from __future__ import annotations

from collections.abc import Callable

from support import latest_values

from artimon.servers import HdfsServer
from artimon.stack import agent_properties
from collector_agent import Agent
from vhms.server import Store, VhmsService


def properties(url: str, vhms_port: int) -> str:
    """A jmx source reading the NameNode's /jmx (Hadoop's JSON) into a VHMS shard."""
    namenode = {
        "type": "jmx",
        "protocol": "hadoop",
        "targets": f"{url}/jmx",
        "job": "namenode",
        "interval": 1,
        "mbeans.fs": "Hadoop:service=NameNode,name=FSNamesystem",
        "attributes": "(Capacity|Blocks|Files).*",
        "namePrefix": "hdfs.",
        "channels": "ch",
    }
    store = {
        "type": "vhms",
        "channel": "ch",
        "servers": f"default@127.0.0.1:{vhms_port}",
        "maxBackoffSleep": 100,
    }
    return agent_properties(
        "a", sources={"nn": namenode}, channels={"ch": {"type": "memory"}}, sinks={"store": store}
    )


def test_the_namenode_servlet_into_vhms(hdfs: HdfsServer, wait: Callable[..., None]) -> None:
    shard = VhmsService(Store(), http_port=None, wal=False)
    shard.start(register=False)
    agent = Agent.from_properties(properties(hdfs.webhdfs, shard.port), "a", {})
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
