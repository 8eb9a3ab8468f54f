"""The query API behind Prometheus's web configuration file (issue 28): TLS and basic auth
with bcrypt hashes; a wrong password is a 401, plain HTTP is refused, and Debian's
``promtool`` (a client we did not write) queries through it. ``artimon api`` refuses a
file it cannot use, naming the key."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import httpx
import numpy as np
import pytest
from support import TlsFiles

from bookkeeper.ground import BackgroundServer, load_web_config
from query_dsl import Client, Limits, Matrix, QueryError, create_app
from vhms import LocalClient
from vhms.server import Store

NOW_S = int(time.time()) // 60 * 60


def web_config_file(tmp_path: Path, tls_files: TlsFiles, password: bytes = b"s3cret") -> Path:
    """Prometheus's documented example: a server certificate and one bcrypt user."""
    path = tmp_path / "web.yml"
    hashed = bcrypt.hashpw(password, bcrypt.gensalt(10)).decode()
    path.write_text(
        "tls_server_config:\n"
        f"  cert_file: {tls_files.server}\n"
        f"  key_file: {tls_files.server}\n"
        f"basic_auth_users:\n  alice: '{hashed}'\n"
    )
    return path


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles) -> Iterator[BackgroundServer]:
    store = Store("15s:400")
    keys = ["up{instance=a:9100,job=node}", "up{instance=b:9100,job=node}"]
    store.ingest(keys, np.array([1.0, 0.0]), np.full(2, (NOW_S - 30) * 1000))
    config = load_web_config(web_config_file(tmp_path_factory.mktemp("web"), tls_files))
    server = BackgroundServer(create_app(LocalClient(store), limits=Limits(timeout_s=10)), web_config=config)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_tls_and_basic_auth(api: BackgroundServer, tls_files: TlsFiles) -> None:
    query = {"query": "sum(up)", "time": str(NOW_S)}
    assert api.url.startswith("https://127.0.0.1:")
    with httpx.Client(verify=ssl.create_default_context(cafile=str(tls_files.ca)), timeout=10) as client:
        answer = client.get(f"{api.url}/prometheus/api/v1/query", params=query, auth=("alice", "s3cret"))
        assert answer.status_code == 200, answer.text
        assert answer.json()["data"]["result"][0]["value"][1] == "1"
        for auth in (("alice", "S3cret"), ("bob", "s3cret")):
            wrong = client.get(f"{api.url}/prometheus/api/v1/query", params=query, auth=auth)
            assert wrong.status_code == 401 and "data" not in wrong.text
        assert client.get(f"{api.url}/prometheus/api/v1/query", params=query).status_code == 401
        assert client.get(f"{api.url}/metrics").status_code == 401  # every path, as in Prometheus
    with pytest.raises(httpx.HTTPError):  # plain HTTP is not served on the TLS port
        httpx.get(f"http://127.0.0.1:{api.port}/prometheus/api/v1/query", params=query, timeout=5)
    untrusting = ssl.create_default_context(cafile=str(tls_files.other_ca))
    with pytest.raises(httpx.ConnectError):  # a client that does not trust the certificate
        httpx.get(f"{api.url}/health", verify=untrusting, timeout=5)


def promtool(base: str, expression: str, ca: Path) -> subprocess.CompletedProcess[str]:
    """Debian's promtool (2.42, older than its --http.config.file): basic auth from the URL's
    user info, the CA from SSL_CERT_FILE, as Go's HTTP client reads them."""
    return subprocess.run(
        [shutil.which("promtool") or "promtool", "query", "instant", f"--time={NOW_S}", base, expression],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SSL_CERT_FILE": str(ca)},
    )


def test_promtool_queries_through_tls_and_basic_auth(api: BackgroundServer, tls_files: TlsFiles) -> None:
    base = f"https://alice:s3cret@127.0.0.1:{api.port}/prometheus"
    done = promtool(base, "up", tls_files.ca)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f'up{{instance="a:9100", job="node"}} => 1 @[{NOW_S}]',
        f'up{{instance="b:9100", job="node"}} => 0 @[{NOW_S}]',
    ]
    wrong = promtool(base.replace("s3cret", "guess"), "up", tls_files.ca)
    assert wrong.returncode != 0 and "401" in wrong.stderr
    untrusted = promtool(base, "up", tls_files.other_ca)
    assert untrusted.returncode != 0 and "certificate" in untrusted.stderr


def artimon_api(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "artimon", "api", "--port", "0", "--vhms", "127.0.0.1:1", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_artimon_api_refuses_a_file_it_cannot_use(tmp_path: Path, tls_files: TlsFiles) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("tls_server_config:\n  cert_file: nowhere.pem\n  min_verison: TLS12\n")
    done = artimon_api("--web.config.file", str(bad))
    assert done.returncode == 2
    assert f"web config {bad}: tls_server_config.min_verison: unknown key" in done.stderr
    good = web_config_file(tmp_path, tls_files)
    both = artimon_api("--web.config.file", str(good), "--token", "t")
    assert both.returncode == 2 and "--token and the web config's basic_auth_users" in both.stderr


def test_the_python_client_with_user_info_and_ssl_cert_file(
    api: BackgroundServer, tls_files: TlsFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_files.ca))  # httpx's, as Go's
    with Client(f"https://alice:s3cret@127.0.0.1:{api.port}") as client:
        answer = client.query('fetch("up", last=10m)')
        assert isinstance(answer, Matrix) and len(answer.values) == 2
    with (
        Client(f"https://alice:guess@127.0.0.1:{api.port}") as client,
        pytest.raises(QueryError, match="401"),
    ):
        client.query('fetch("up", last=10m)')
