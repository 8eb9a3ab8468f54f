"""The HDFS harness: a real NameNode and DataNode from Hadoop's jars, each killed with
SIGKILL and started again on the same data, the directory held against a second server."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from artimon.servers import HdfsServer
from bookkeeper import DirectoryInUseError

pytestmark = pytest.mark.slow


@pytest.fixture
def hdfs_alone(tmp_path: Path) -> Iterator[HdfsServer]:
    """A server of its own: this test kills its daemons."""
    server = HdfsServer(tmp_path / "hdfs").start()
    try:
        yield server
    finally:
        server.stop()


def webhdfs(server: HdfsServer, path: str, op: str, method: str = "GET", data: bytes | None = None) -> bytes:
    url = f"{server.webhdfs}/webhdfs/v1{path}?op={op}&user.name=root"
    if data is not None:  # the NameNode names the DataNode to send the bytes to
        with urllib.request.urlopen(
            urllib.request.Request(url + "&noredirect=true", method=method)
        ) as answer:
            url = json.loads(answer.read())["Location"]
    request = urllib.request.Request(url, method=method, data=data)
    with urllib.request.urlopen(request, timeout=20) as answer:
        return bytes(answer.read())


def test_a_file_survives_a_kill_of_each_daemon_and_a_full_restart_and_safe_mode_is_not_ready(
    hdfs_alone: HdfsServer,
) -> None:
    server = hdfs_alone
    assert server.uri == f"hdfs://127.0.0.1:{server.nn_port}"
    assert f"<value>{server.uri}</value>" in (server.conf_dir / "core-site.xml").read_text()
    webhdfs(server, "/artimon/a.txt", "CREATE&overwrite=true", "PUT", b"one sample")
    server.kill_datanode()
    assert server.datanode is None and not server.ready()
    server.start_datanode()
    server.kill_namenode()
    assert not server.ready()
    server.start_namenode()
    assert webhdfs(server, "/artimon/a.txt", "OPEN") == b"one sample"
    server.stop()
    server.start()  # the same data, formatted once
    assert webhdfs(server, "/artimon/a.txt", "OPEN") == b"one sample"
    assert server.ls("/artimon") == ["a.txt"] and server.ls("/nothing-here") == []
    server.admin("-safemode", "enter")
    assert not server.ready()
    server.admin("-safemode", "leave")
    assert server.ready()
    with pytest.raises(DirectoryInUseError, match="hdfs"):
        HdfsServer(server.data_dir).start()
