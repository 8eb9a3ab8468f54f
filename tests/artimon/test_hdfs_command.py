"""``artimon hdfs``: a real NameNode and DataNode until Ctrl-C, WebHDFS answering meanwhile."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from artimon.servers import free_port

pytestmark = pytest.mark.slow


def test_hdfs_command_serves_webhdfs_until_ctrl_c(tmp_path: Path) -> None:
    nn_port, http_port = free_port(), free_port()
    ports = ["--nn-port", str(nn_port), "--http-port", str(http_port)]
    process = subprocess.Popen(
        [sys.executable, "-m", "artimon", "hdfs", *ports, "--data-dir", str(tmp_path / "hdfs")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready.startswith(f"HDFS ready at hdfs://127.0.0.1:{nn_port} in "), ready
        assert f"HADOOP_CONF_DIR={tmp_path / 'hdfs' / 'conf'}" in ready
        url = f"http://127.0.0.1:{http_port}/webhdfs/v1/?op=GETFILESTATUS&user.name=root"
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert json.loads(answer.read())["FileStatus"]["type"] == "DIRECTORY"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "HDFS stopped." in out
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)
