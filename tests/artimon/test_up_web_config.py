"""``artimon up --web.config.file`` (issue 28): every HTTP port of the stack behind the
operator's file (TLS, a bcrypt user); the query API answers only over TLS and only to the
file's user; ``up``'s own agent scrapes the stack's ports as a user of its own (its password
in the data directory, mode 0600) trusting the served certificate, so its self-metrics
rounds store with no failed scrape; a remote-write source added to its agent takes the same
file through ``${ARTIMON_WEB_CONFIG_FILE}``. ``up`` runs as an operator runs it, in its own
process."""

from __future__ import annotations

import os
import re
import signal
import ssl
import stat
import subprocess
import sys
from pathlib import Path

import bcrypt
import httpx
import pytest
from support import Lines, TlsFiles, wait_until

from artimon.servers import free_port
from artimon.stack import SELF_USER, up_agent
from bookkeeper.zk import AUTH_ENV, AUTH_FILE_ENV

SELF_SOURCES = ("api", "vhms", "agent")


def web_config(directory: Path, tls_files: TlsFiles) -> Path:
    path = directory / "web.yml"
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(10)).decode()
    path.write_text(
        f"tls_server_config:\n  cert_file: {tls_files.server}\n  key_file: {tls_files.server}\n"
        f"basic_auth_users:\n  alice: '{hashed}'\n"
    )
    return path


def self_scrape_failures(client: httpx.Client, monitor: str) -> dict[str, float]:
    """The agent's ``ScrapeFailCount`` and ``ScrapeSuccessCount`` of its self-scraping sources."""
    counters = client.get(f"{monitor}/metrics", auth=("alice", "s3cret")).raise_for_status().json()
    return {
        f"{name}.{counter}": counters[f"SOURCE.{name}"][counter]
        for name in SELF_SOURCES
        for counter in ("ScrapeFailCount", "ScrapeSuccessCount")
    }


@pytest.mark.slow
def test_up_serves_every_port_behind_the_file_and_scrapes_itself(tmp_path: Path, tls_files: TlsFiles) -> None:
    data = tmp_path / "data"
    data.mkdir()
    receiver = free_port()  # a remote-write source added to up's agent, behind the same file
    properties = re.sub(r"^(up\.sources = .*)$", r"\1 prom", up_agent(), count=1, flags=re.MULTILINE)
    remote_write = {"type": "prometheus_remote_write", "bind": "127.0.0.1", "port": receiver}
    remote_write |= {"channels": "durable", "webConfigFile": "${ARTIMON_WEB_CONFIG_FILE}"}
    (data / "agent.properties").write_text(
        properties + "".join(f"up.sources.prom.{key} = {value}\n" for key, value in remote_write.items())
    )
    env = {k: v for k, v in os.environ.items() if k not in ("ARTIMON_ZK", AUTH_ENV, AUTH_FILE_ENV)}
    args = ["up", "--demo", "--no-spark", "--interval", "1", "--data-dir", str(data)]
    args += ["--zk-port", "0", "--api-port", "0", "--thrift-port", "0"]
    args += ["--web.config.file", str(web_config(tmp_path, tls_files))]
    process = subprocess.Popen(
        [sys.executable, "-m", "artimon", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    lines = Lines(process.stdout)
    try:
        api_line = lines.until(lambda line: line.startswith("[ready] query api"), 120, "the query API")
        agent_line = lines.until(lambda line: line.startswith("[ready] agent"), 120, "the agent")
        api = re.search(r"(https://\S+)/api/v1/query", api_line)
        monitor = re.search(r"metrics on (\S+)/metrics", agent_line)
        assert api is not None and monitor is not None and monitor.group(1).startswith("https://"), agent_line
        password = data / "self-scrape.pass"
        assert stat.S_IMODE(password.stat().st_mode) == 0o600
        query = {"query": 'up{job="artimon"}'}
        with pytest.raises(httpx.HTTPError):  # plain HTTP is not served
            httpx.get(api.group(1).replace("https://", "http://") + "/prometheus/api/v1/query", timeout=5)
        verify = ssl.create_default_context(cafile=str(tls_files.ca))
        with httpx.Client(verify=verify, timeout=10) as client:
            promql = f"{api.group(1)}/prometheus/api/v1/query"
            assert client.get(promql, params=query).status_code == 401
            assert client.get(promql, params=query, auth=("alice", "guess")).status_code == 401

            def every_part_up() -> bool:
                answer = client.get(promql, params=query, auth=("alice", "s3cret")).raise_for_status().json()
                found = {s["metric"]["instance"]: s["value"][1] for s in answer["data"]["result"]}
                return found == dict.fromkeys(SELF_SOURCES, "1")

            wait_until(every_part_up, 90, "up 1 for the API, VHMS and the agent, scraped over TLS")
            wait_until(
                lambda: all(
                    v >= 3
                    for k, v in self_scrape_failures(client, monitor.group(1)).items()
                    if "Success" in k
                ),
                60,
                "three self-scrape rounds of each part",
            )
            counts = self_scrape_failures(client, monitor.group(1))
            assert {k: v for k, v in counts.items() if "Fail" in k} == dict.fromkeys(
                (f"{name}.ScrapeFailCount" for name in SELF_SOURCES), 0
            ), counts
            # up's own user is not the operator's: it works, and only with its password
            own = (SELF_USER, password.read_text().strip())
            assert client.get(promql, params=query, auth=own).status_code == 200
            write = f"https://127.0.0.1:{receiver}/api/v1/write"
            assert client.post(write, content=b"x").status_code == 401
            assert client.post(write, content=b"x", auth=("alice", "s3cret")).status_code in (400, 415)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    output = lines.rest()
    assert process.stdout is not None
    process.stdout.close()
    assert process.returncode == 0, output[-20:]


def test_up_refuses_a_file_that_requires_client_certificates(tmp_path: Path, tls_files: TlsFiles) -> None:
    path = tmp_path / "web.yml"
    path.write_text(
        f"tls_server_config:\n  cert_file: {tls_files.server}\n  key_file: {tls_files.server}\n"
        f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {tls_files.ca}\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("ARTIMON_ZK", AUTH_ENV, AUTH_FILE_ENV)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "artimon",
            "up",
            "--data-dir",
            str(tmp_path / "data"),
            "--web.config.file",
            str(path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "RequireAndVerifyClientCert is not for `artimon up`" in done.stderr
