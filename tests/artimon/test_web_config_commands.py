"""``--web.config.file`` on the commands' HTTP ports, as an operator runs them: ``artimon vhms``
(``/health``, ``/stats``) and ``artimon agent`` (monitoring) serve TLS with basic auth from
Prometheus's web configuration file; a file they cannot use stops them (and ``alerts`` and
``spark``, before their work begins) with status 2."""

from __future__ import annotations

import os
import re
import select
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import bcrypt
import httpx
import pytest
from support import TlsFiles

from bookkeeper.zk import AUTH_ENV, AUTH_FILE_ENV

ARTIMON = [sys.executable, "-m", "artimon"]
DEMO_RULES = Path(__file__).resolve().parents[2] / "query_dsl" / "alerts" / "examples" / "demo.yaml"
URL = re.compile(r"https://127\.0\.0\.1:\d+")


def web_config(tmp_path: Path, tls_files: TlsFiles) -> Path:
    path = tmp_path / "web.yml"
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()
    path.write_text(
        f"tls_server_config:\n  cert_file: {tls_files.server}\n  key_file: {tls_files.server}\n"
        f"basic_auth_users:\n  ops: '{hashed}'\n"
    )
    return path


@contextmanager
def running(*args: str, marker: str) -> Iterator[str]:
    """The command started; the first https URL on its line containing ``marker``."""
    env = {k: v for k, v in os.environ.items() if k not in (AUTH_ENV, AUTH_FILE_ENV, "ARTIMON_ZK")}
    with subprocess.Popen(
        [*ARTIMON, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    ) as process:
        assert process.stdout is not None
        try:
            deadline, seen = time.monotonic() + 60, b""
            while marker.encode() not in seen:
                assert process.poll() is None, seen + process.stdout.read()
                assert time.monotonic() < deadline, f"no line with {marker!r}: {seen!r}"
                if select.select([process.stdout], [], [], 0.5)[0]:
                    seen += process.stdout.readline()
            line = next(x for x in seen.decode().splitlines() if marker in x)
            found = URL.search(line)
            assert found, line
            yield found.group(0)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


def check_port(url: str, path: str, tls_files: TlsFiles) -> None:
    with httpx.Client(verify=ssl.create_default_context(cafile=str(tls_files.ca)), timeout=10) as client:
        assert client.get(url + path, auth=("ops", "s3cret")).status_code == 200
        assert client.get(url + path, auth=("ops", "guess")).status_code == 401
        assert client.get(url + path).status_code == 401
    with pytest.raises(httpx.HTTPError):
        httpx.get(url.replace("https:", "http:") + path, timeout=5)


@pytest.mark.slow
def test_vhms_http_port_behind_a_web_config(tmp_path: Path, tls_files: TlsFiles) -> None:
    web = web_config(tmp_path, tls_files)
    command = ("vhms", "--no-register", "--data-dir", str(tmp_path / "vhms"), "--web.config.file", str(web))
    with running(*command, marker="HTTP on") as url:
        check_port(url, "/health", tls_files)


@pytest.mark.slow
def test_agent_monitoring_behind_a_web_config(tmp_path: Path, tls_files: TlsFiles) -> None:
    conf = tmp_path / "agent.properties"
    conf.write_text(
        "a1.sources = r1\na1.channels = c1\na1.sinks = k1\n"
        "a1.sources.r1.type = seq\na1.sources.r1.channels = c1\n"
        "a1.channels.c1.type = memory\na1.sinks.k1.type = null\na1.sinks.k1.channel = c1\n"
    )
    web = web_config(tmp_path, tls_files)
    command = ("agent", "-f", str(conf), "-n", "a1", "--monitor-port", "0", "--web.config.file", str(web))
    with running(*command, marker="metrics on") as url:
        check_port(url, "/metrics", tls_files)


@pytest.mark.parametrize(
    "command",
    [
        ("vhms", "--no-register", "--data-dir", "{tmp}/vhms"),
        ("agent", "-f", "{tmp}/agent.properties", "-n", "a1"),
        ("alerts", "-f", str(DEMO_RULES), "--metrics-port", "0"),
        (
            "spark",
            "raw_ingest",
            "--landing",
            "{tmp}",
            "--output",
            "file://{tmp}/o",
            "--checkpoint",
            "file://{tmp}/c",
        ),
    ],
)
def test_a_file_the_command_cannot_use_stops_it_naming_the_key(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    bad = tmp_path / "web.yml"
    bad.write_text("basic_auth_users:\n  ops: plain-text-password\n")
    (tmp_path / "agent.properties").write_text(
        "a1.sources = r1\na1.channels = c1\na1.sinks = k1\na1.sources.r1.type = seq\n"
        "a1.sources.r1.channels = c1\na1.channels.c1.type = memory\na1.sinks.k1.type = null\n"
        "a1.sinks.k1.channel = c1\n"
    )
    name, *rest = (part.format(tmp=tmp_path) for part in command)
    done = subprocess.run(
        [*ARTIMON, name, "--web.config.file", str(bad), *rest], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert f"web config {bad}: basic_auth_users.ops: is not a bcrypt hash" in done.stderr
