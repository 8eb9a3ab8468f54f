"""Prometheus's web configuration file, read strictly (``bookkeeper.ground.load_web_config``):
the format's keys work, and every bad file is refused with a message naming the key; a
``BackgroundServer`` behind one serves TLS, basic auth, headers and the rate limit."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import bcrypt
import httpx
import pytest
import yaml
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import TlsFiles

from bookkeeper.ground import BackgroundServer, WebConfigError, is_loopback, load_web_config

# a fixed salt: the hash is in a test's id, which pytest-xdist's workers must collect alike
HASH = bcrypt.hashpw(b"s3cret", b"$2b$04$ArtimonTestSaltFixed1u").decode()


def write(tmp_path: Path, text: str, name: str = "web.yml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def tls_block(files: TlsFiles, extra: str = "") -> str:
    return f"tls_server_config:\n  cert_file: {files.server}\n  key_file: {files.server}\n{extra}"


def test_an_empty_file_is_plain_http_without_users(tmp_path: Path) -> None:
    config = load_web_config(write(tmp_path, ""))
    assert config.tls is None and not config.users and not config.authenticates and config.scheme == "http"


def test_a_full_prometheus_file_is_read(tmp_path: Path, tls_files: TlsFiles) -> None:
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "server.pem").write_bytes(tls_files.server.read_bytes())
    text = f"""
tls_server_config:
  cert_file: certs/server.pem
  key_file: certs/server.pem
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: {tls_files.ca}
  min_version: TLS13
  max_version: TLS13
  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]
  prefer_server_cipher_suites: false
http_server_config:
  http2: false
  headers:
    X-Frame-Options: deny
    X-Content-Type-Options: nosniff
    Strict-Transport-Security: max-age=31536000
basic_auth_users:
  alice: {HASH}
  bob: $2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG
rate_limit:
  interval: 100ms
  burst: 5
"""
    config = load_web_config(write(tmp_path, text))
    assert config.tls is not None and config.client_certs_required and config.authenticates
    assert config.tls.minimum_version == ssl.TLSVersion.TLSv1_3
    assert sorted(config.users) == ["alice", "bob"]
    assert ("X-Frame-Options", "deny") in config.headers
    assert (config.rate_interval_s, config.rate_burst) == (0.1, 5)


def test_inline_certificate_key_and_client_ca(tmp_path: Path, tls_files: TlsFiles) -> None:
    pem = tls_files.server.read_text()
    indent = lambda text: "\n".join("    " + line for line in text.splitlines())  # noqa: E731
    text = (
        f"tls_server_config:\n  cert: |\n{indent(pem)}\n  key: |\n{indent(pem)}\n"
        f"  client_auth_type: VerifyClientCertIfGiven\n  client_ca: |\n{indent(tls_files.ca.read_text())}\n"
    )
    config = load_web_config(write(tmp_path, text))
    assert config.tls is not None and config.tls.verify_mode == ssl.CERT_OPTIONAL
    assert not config.authenticates  # a certificate if given is no credential required
    assert config.certificates == load_web_config(write(tmp_path, tls_block(tls_files), "f.yml")).certificates


def test_the_served_chain_is_kept_without_its_key(tmp_path: Path, tls_files: TlsFiles) -> None:
    """What a client of this very process pins (``artimon up``'s self-scrape)."""
    config = load_web_config(write(tmp_path, tls_block(tls_files)))
    blocks = config.certificates.count("-----BEGIN CERTIFICATE-----")
    assert blocks == tls_files.server.read_text().count("-----BEGIN CERTIFICATE-----") >= 1
    assert "PRIVATE KEY" not in config.certificates
    pinned = ssl.create_default_context(cadata=config.certificates)
    pinned.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    server = BackgroundServer(FastAPI(), web_config=config)
    server.start()
    try:
        assert httpx.get(f"{server.url}/nothing", verify=pinned, timeout=5).status_code == 404
    finally:
        server.stop()
    assert load_web_config(write(tmp_path, "", "plain.yml")).certificates == ""


GARBAGE = [
    ("- a list", "the file: must be a mapping"),
    ("tls_server_config: {cert_file: x", "not YAML"),
    ("basic_auth: {a: b}", "basic_auth: unknown key"),
    ("tls_server_config: 5", "tls_server_config: must be a mapping"),
    ("tls_server_config: {certfile: a}", "tls_server_config.certfile: unknown key"),
    ("tls_server_config: {key_file: k.pem}", "missing one of cert or cert_file"),
    ("tls_server_config: {cert_file: nowhere.pem, key_file: nowhere.pem}", "cert_file: "),
    ("tls_server_config: {client_auth_type: Always}", "missing one of cert"),
    ("http_server_config: {http2: yes please}", "http_server_config.http2: must be true or false"),
    ("http_server_config: {headers: {X-Powered-By: me}}", "headers.X-Powered-By: unknown key"),
    ("http_server_config: {headers: {X-Frame-Options: allow}}", "X-Frame-Options: 'allow' is not one of"),
    ("http_server_config: {headers: {X-Content-Type-Options: sniff}}", "X-Content-Type-Options"),
    ("basic_auth_users: [alice]", "basic_auth_users: must be a mapping"),
    ("basic_auth_users: {alice: s3cret}", "basic_auth_users.alice: is not a bcrypt hash"),
    ("basic_auth_users: {alice: 12}", "basic_auth_users.alice: is not a bcrypt hash"),
    (f"basic_auth_users: {{'a:b': '{HASH}'}}", "a user name is a non-empty string without ':'"),
    ("rate_limit: {interval: soon, burst: 1}", "rate_limit.interval"),
    ("rate_limit: {interval: 1s, burst: -1}", "rate_limit.burst"),
    ("rate_limit: {interval: 1s}", "rate_limit.burst: must be at least 1"),
]


@pytest.mark.parametrize(("text", "message"), GARBAGE)
def test_garbage_files_are_refused_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(WebConfigError, match="web config .*" + message.replace("(", r"\(")) as caught:
        load_web_config(path)
    assert str(path) in str(caught.value)


TLS_GARBAGE = [
    ("  client_auth_type: RequireAnyClientCert\n", "RequireAnyClientCert .* is not supported"),
    ("  client_auth_type: Sometimes\n", "client_auth_type: 'Sometimes' is not one of"),
    ("  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file or client_ca"),
    ("  client_ca_file: {ca}\n", "client CAs are configured without a client auth policy"),
    ("  min_version: TLS14\n", "min_version: 'TLS14' is not one of"),
    ("  min_version: TLS13\n  max_version: TLS12\n", "min_version: is above max_version"),
    ("  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n", r"cipher_suites\[0\]: unknown cipher"),
    ("  cipher_suites: TLS_AES_128_GCM_SHA256\n", "cipher_suites: must be a list"),
    ("  curve_preferences: [X25519]\n", "curve_preferences: not supported"),
    ("  client_allowed_sans: [a.example]\n", "client_allowed_sans: not supported"),
    ("  cert: inline\n", "cert: give cert or cert_file, not both"),
    ("  prefer_server_cipher_suites: 1\n", "prefer_server_cipher_suites: must be true or false"),
    ("  min_version: [TLS12]\n", r"min_version: \['TLS12'\] is not one of"),
    ("  client_auth_type: [NoClientCert]\n", "client_auth_type: must be a string, not list"),
    (
        "  client_ca_file: [a.pem]\n  client_auth_type: VerifyClientCertIfGiven\n",
        "client_ca_file: must be a non-empty",
    ),
]


@pytest.mark.parametrize(("extra", "message"), TLS_GARBAGE)
def test_tls_settings_that_cannot_be_honoured_are_refused(
    tmp_path: Path, tls_files: TlsFiles, extra: str, message: str
) -> None:
    path = write(tmp_path, tls_block(tls_files, extra.format(ca=tls_files.ca)))
    with pytest.raises(WebConfigError, match=message):
        load_web_config(path)


def test_files_that_are_not_pem_or_too_large_or_missing(tmp_path: Path, tls_files: TlsFiles) -> None:
    junk = write(tmp_path, "not a certificate", "junk.pem")
    with pytest.raises(WebConfigError, match=r"tls_server_config\.cert: cannot load"):
        load_web_config(write(tmp_path, f"tls_server_config: {{cert_file: {junk}, key_file: {junk}}}"))
    extra = f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {junk}\n"
    with pytest.raises(WebConfigError, match="client_ca_file: no CA certificate"):
        load_web_config(write(tmp_path, tls_block(tls_files, extra)))
    with pytest.raises(WebConfigError, match="larger than"):
        load_web_config(write(tmp_path, "#" * (2 << 20)))
    with pytest.raises(WebConfigError, match="cannot read it"):
        load_web_config(tmp_path / "absent.yml")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300) | st.text(max_size=300))
def test_any_bytes_load_or_are_refused_with_a_web_config_error(tmp_path: Path, data: bytes | str) -> None:
    path = tmp_path / "fuzz.yml"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    with contextlib.suppress(WebConfigError):
        load_web_config(path)


def test_loopback() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.3.4.5", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.net", ""))


@pytest.fixture
def served(tmp_path: Path, tls_files: TlsFiles) -> Iterator[BackgroundServer]:
    app = FastAPI()

    @app.get("/hello")
    def hello() -> dict[str, str]:
        return {"hello": "world"}

    extra = "http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
    extra += f"basic_auth_users:\n  alice: {HASH}\nrate_limit:\n  interval: 1s\n  burst: 20\n"
    server = BackgroundServer(app, web_config=load_web_config(write(tmp_path, tls_block(tls_files, extra))))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_server_behind_a_web_config(served: BackgroundServer, tls_files: TlsFiles) -> None:
    assert served.url.startswith("https://127.0.0.1:")
    with httpx.Client(verify=ssl.create_default_context(cafile=str(tls_files.ca)), timeout=10) as client:
        answer = client.get(f"{served.url}/hello", auth=("alice", "s3cret"))
        assert answer.status_code == 200 and answer.json() == {"hello": "world"}
        assert answer.headers["x-frame-options"] == "deny"
        for auth in (("alice", "wrong"), ("mallory", "s3cret"), ("alice", "x" * 100)):
            refused = client.get(f"{served.url}/hello", auth=auth)
            assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Basic")
        for header in ("Basic !!!", "Basic " + "YWxpY2U=", "Bearer s3cret", "Basic"):
            assert client.get(f"{served.url}/hello", headers={"Authorization": header}).status_code == 401
        assert client.get(f"{served.url}/hello").status_code == 401
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port
            httpx.get(served.url.replace("https", "http") + "/hello", auth=("alice", "s3cret"), timeout=5)
        # the bucket of 20 is spent by now (13 requests above and these): 429
        statuses = [
            client.get(f"{served.url}/hello", auth=("alice", "s3cret")).status_code for _ in range(12)
        ]
        assert statuses[0] == 200 and statuses[-1] == 429


def test_a_flood_of_wrong_passwords_leaves_a_known_user_served(tmp_path: Path, tls_files: TlsFiles) -> None:
    """bcrypt has threads of its own: the wrong passwords queue for them while a user whose
    password was verified once is answered at once."""
    app = FastAPI()

    @app.get("/hello")
    def hello() -> dict[str, str]:
        return {"hello": "world"}

    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(10)).decode()
    config = load_web_config(
        write(tmp_path, tls_block(tls_files, f"basic_auth_users:\n  alice: '{hashed}'\n"))
    )
    server = BackgroundServer(app, web_config=config)
    server.start()
    context = ssl.create_default_context(cafile=str(tls_files.ca))

    def wrong(_: int) -> int:
        with httpx.Client(verify=context, timeout=60) as client:
            return client.get(f"{server.url}/hello", auth=("mallory", "guess")).status_code

    try:
        with httpx.Client(verify=context, timeout=10) as client:
            assert client.get(f"{server.url}/hello", auth=("alice", "s3cret")).status_code == 200
            with ThreadPoolExecutor(24) as pool:
                flood = [pool.submit(wrong, i) for i in range(24)]
                assert client.get(f"{server.url}/hello", auth=("alice", "s3cret")).status_code == 200
                assert not all(f.done() for f in flood)  # answered while bcrypt was still busy
                assert [f.result() for f in flood] == [401] * 24
    finally:
        server.stop()


def test_client_certificates_as_credentials(tmp_path: Path, tls_files: TlsFiles) -> None:
    app = FastAPI()

    @app.get("/hello")
    def hello() -> dict[str, str]:
        return {"hello": "world"}

    extra = f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {tls_files.ca}\n"
    config = load_web_config(write(tmp_path, tls_block(tls_files, extra)))
    assert config.authenticates and not config.users
    server = BackgroundServer(app, web_config=config)
    server.start()
    try:
        with_cert = ssl.create_default_context(cafile=str(tls_files.ca))
        with_cert.load_cert_chain(str(tls_files.client))
        with httpx.Client(verify=with_cert, timeout=10) as client:
            assert client.get(f"{server.url}/hello").json() == {"hello": "world"}
        without = ssl.create_default_context(cafile=str(tls_files.ca))
        with httpx.Client(verify=without, timeout=10) as client, pytest.raises(httpx.HTTPError):
            client.get(f"{server.url}/hello")
    finally:
        server.stop()


KEYS = ("tls_server_config", "http_server_config", "basic_auth_users", "rate_limit", "headers", "http2")
TLS_KEYS = ("cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "cipher_suites")
SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
WORDS = st.sampled_from(
    ["TLS12", "TLS14", "NoClientCert", "RequireAndVerifyClientCert", "$2b$04$x", "1s", ""]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_documents_of_the_right_shape_with_wrong_values(
    tmp_path: Path, tls_files: TlsFiles, data: st.DataObject
) -> None:
    """Keys of the format with values of any kind (a real certificate among them): loaded or
    refused with a ``WebConfigError``, never another exception."""
    values = (
        SCALARS
        | WORDS
        | st.sampled_from([str(tls_files.server), str(tls_files.ca)])
        | st.lists(WORDS, max_size=3)
    )
    tls = st.dictionaries(st.sampled_from(TLS_KEYS), values, max_size=6)
    section = tls | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), values, max_size=3)
    document = data.draw(st.dictionaries(st.sampled_from(KEYS), section | values, max_size=4))
    path = tmp_path / "shaped.yml"
    path.write_text(yaml.safe_dump(document))
    with contextlib.suppress(WebConfigError):
        load_web_config(path)
