"""The remote-write receiver behind Prometheus's web configuration file (issue 28): a real
Prometheus remote-writes through ``tls_config`` and ``basic_auth`` into VHMS; a wrong
password is a 401 (which Prometheus does not retry), plain HTTP is refused; a receiver
bound beyond loopback without credentials does not start."""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import bcrypt
import httpx
import pytest
from support import TlsFiles

from artimon.servers import PrometheusServer, free_port
from artimon.stack import agent_properties
from collector_agent import Agent, ConfigurationError
from vhms.server import Store, VhmsService

PROMETHEUS = """
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ["127.0.0.1:{port}"]
remote_write:
  - url: "{url}"
    tls_config:
      ca_file: {ca}
    basic_auth:
      username: alice
      password: s3cret
    queue_config:
      batch_send_deadline: 1s
      min_backoff: 100ms
      max_backoff: 1s
"""


def web_config(directory: Path, tls_files: TlsFiles, *, users: bool = True) -> Path:
    path = directory / "web.yml"
    text = f"tls_server_config:\n  cert_file: {tls_files.server}\n  key_file: {tls_files.server}\n"
    if users:
        text += f"basic_auth_users:\n  alice: '{bcrypt.hashpw(b's3cret', bcrypt.gensalt(10)).decode()}'\n"
    path.write_text(text)
    return path


def properties(bind: str, web_config_file: Path | None, vhms_port: int = 1) -> str:
    receiver = {"type": "prometheus_remote_write", "bind": bind, "port": 0, "channels": "ch"}
    if web_config_file is not None:
        receiver["webConfigFile"] = str(web_config_file)
    channel = {"type": "memory", "capacity": 1000, "transactionCapacity": 1000, "keep-alive": 0}
    out = {
        "type": "vhms",
        "channel": "ch",
        "servers": f"default@127.0.0.1:{vhms_port}",
        "time": "sample",
        "timeout": 5,
        "batchSize": 1000,
        "maxBackoffSleep": 100,
    }
    return agent_properties("a", sources={"prom": receiver}, channels={"ch": channel}, sinks={"out": out})


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles
) -> Iterator[tuple[VhmsService, Agent]]:
    service = VhmsService(Store("1s:900"), http_port=None, snapshot_dir=None, wal=False)
    service.start(register=False)
    web = web_config(tmp_path_factory.mktemp("web"), tls_files)
    agent = Agent.from_properties(properties("127.0.0.1", web, service.port), "a", {})
    agent.start()
    try:
        yield service, agent
    finally:
        agent.stop()
        service.stop()


@pytest.mark.slow
def test_prometheus_remote_writes_through_tls_and_basic_auth(
    stack: tuple[VhmsService, Agent], tls_files: TlsFiles, tmp_path: Path, wait: Callable[..., None]
) -> None:
    service, agent = stack
    url = agent.sources["prom"].url  # type: ignore[attr-defined]
    assert url.startswith("https://127.0.0.1:")
    port = free_port()
    start_ms = int(time.time()) * 1000 - 10_000
    config = PROMETHEUS.format(port=port, url=url, ca=tls_files.ca)
    with PrometheusServer(tmp_path / "prometheus", port, config=config):
        wait(
            lambda: service.store.fetch("up", start_ms, start_ms + 600_000, resolution=1).series(),
            timeout=60,
            what="Prometheus's up in VHMS, through TLS and basic auth",
        )
    ((name, labels),) = service.store.fetch("up", start_ms, start_ms + 600_000, resolution=1).series()
    assert (name, labels) == ("up", {"instance": f"127.0.0.1:{port}", "job": "prometheus"})
    counters = agent.sources["prom"].metrics()
    assert counters["RemoteWrite1RequestCount"] >= 1 and counters["RequestRefusedCount"] == 0


def test_a_wrong_password_or_plain_http_is_refused(
    stack: tuple[VhmsService, Agent], tls_files: TlsFiles
) -> None:
    _, agent = stack
    url = agent.sources["prom"].url  # type: ignore[attr-defined]
    headers = {"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf"}
    context = ssl.create_default_context(cafile=str(tls_files.ca))
    with httpx.Client(verify=context, timeout=10, headers=headers) as client:
        for auth in (("alice", "guess"), None):
            answer = client.post(url, content=b"", auth=auth)
            assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Basic")
        assert client.post(url, content=b"garbage", auth=("alice", "s3cret")).status_code == 400
        otlp = url.replace("/api/v1/write", "/api/v1/otlp/v1/metrics")  # the same listener
        assert (
            client.post(otlp, content=b"", headers={"Content-Type": "application/x-protobuf"}).status_code
            == 401
        )
    with pytest.raises(httpx.HTTPError):
        httpx.post(url.replace("https:", "http:"), content=b"", headers=headers, timeout=5)


@pytest.mark.parametrize("bind", ["0.0.0.0", "::", "10.1.2.3", "example.net"])
def test_beyond_loopback_a_write_endpoint_needs_credentials(
    tmp_path: Path, tls_files: TlsFiles, bind: str
) -> None:
    # configured only, never started: nothing listens beyond loopback in the tests
    for web in (None, web_config(tmp_path, tls_files, users=False)):
        with pytest.raises(
            ConfigurationError, match=rf"bind: {bind} is beyond loopback .* needs credentials"
        ):
            Agent.from_properties(properties(bind, web), "a", {})
    Agent.from_properties(properties(bind, web_config(tmp_path, tls_files)), "a", {})


def test_a_web_config_file_it_cannot_use_is_a_configuration_error(tmp_path: Path) -> None:
    bad = tmp_path / "web.yml"
    bad.write_text("basic_auth_users:\n  alice: s3cret\n")
    with pytest.raises(
        ConfigurationError, match=r"webConfigFile: web config .*basic_auth_users\.alice: is not a"
    ):
        Agent.from_properties(properties("127.0.0.1", bad), "a", {})
