"""The ``prometheus`` source against a target behind Prometheus's web configuration file (TLS
and a bcrypt user, trustme certificates): Prometheus's own scrape-config knobs as keys
(``scheme``, ``tls*``, ``basicAuth*``); the right CA and password scrape, the wrong ones
fail clearly: counted, one warning per target, ``up`` 0."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from support import TlsFiles, wait_until

from artimon.stack import agent_properties
from bookkeeper.ground import BackgroundServer, load_web_config
from collector_agent import Agent, ConfigurationError


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles) -> Iterator[BackgroundServer]:
    directory = tmp_path_factory.mktemp("web")
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()
    web = directory / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {tls_files.server}\n  key_file: {tls_files.server}\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )

    async def metrics(_request: object) -> PlainTextResponse:
        return PlainTextResponse("# TYPE answers counter\nanswers_total 42\n")

    server = BackgroundServer(Starlette(routes=[Route("/metrics", metrics)]), web_config=load_web_config(web))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def password_file(tmp_path: Path, password: str) -> Path:
    path = tmp_path / "password"
    path.write_text(f"{password}\n")  # the newline is not part of it, as in Prometheus
    return path


def scraping(target: BackgroundServer, **keys: object) -> Agent:
    properties = agent_properties(
        "a",
        sources={
            "scrape": {
                "type": "prometheus",
                "channels": "ch",
                "targets": f"127.0.0.1:{target.port}",
                "interval": 0.3,
                "scrapeTimeout": 0.25,
                **keys,
            }
        },
        channels={"ch": {"type": "memory", "capacity": 1000}},
        sinks={"drop": {"type": "null", "channel": "ch"}},
    )
    agent = Agent.from_properties(properties, "a", {})
    agent.start()
    return agent


def counters(agent: Agent) -> dict[str, float]:
    return agent.metrics()["SOURCE.scrape"]


def test_the_right_ca_and_password_scrape(
    target: BackgroundServer, tls_files: TlsFiles, tmp_path: Path
) -> None:
    agent = scraping(
        target,
        scheme="https",
        tlsCaFile=tls_files.ca,
        basicAuthUsername="prometheus",
        basicAuthPasswordFile=password_file(tmp_path, "s3cret"),
    )
    try:
        wait_until(lambda: counters(agent)["ScrapeSuccessCount"] >= 2, 20, "two scrapes")
        assert counters(agent)["ScrapeFailCount"] == 0
    finally:
        agent.stop()


def test_the_target_s_own_certificate_as_the_ca_is_trusted(
    target: BackgroundServer, tls_files: TlsFiles, tmp_path: Path
) -> None:
    """A leaf pinned as the trust anchor (Go's verifier accepts it; how ``artimon up``'s agent
    trusts the certificate of its own web configuration file)."""
    agent = scraping(
        target,
        scheme="https",
        tlsCaFile=tls_files.server,
        basicAuthUsername="prometheus",
        basicAuthPasswordFile=password_file(tmp_path, "s3cret"),
    )
    try:
        wait_until(lambda: counters(agent)["ScrapeSuccessCount"] >= 1, 20, "a scrape")
        assert counters(agent)["ScrapeFailCount"] == 0
    finally:
        agent.stop()


@pytest.mark.parametrize(
    ("keys", "scrapes"),
    [
        ({"tlsServerName": "localhost"}, True),  # a name the certificate bears, not the host dialled
        ({"tlsServerName": "elsewhere.example"}, False),
        ({"tlsCaFile": "", "tlsInsecureSkipVerify": "true"}, True),  # the system's CAs, unchecked
    ],
)
@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")  # the product's filter
def test_server_name_and_insecure_skip_verify(
    target: BackgroundServer, tls_files: TlsFiles, tmp_path: Path, keys: dict[str, object], scrapes: bool
) -> None:
    agent = scraping(
        target,
        scheme="https",
        basicAuthUsername="prometheus",
        basicAuthPasswordFile=password_file(tmp_path, "s3cret"),
        **{"tlsCaFile": tls_files.ca, **keys},
    )
    try:
        counter = "ScrapeSuccessCount" if scrapes else "ScrapeFailCount"
        wait_until(lambda: counters(agent)[counter] >= 2, 20, counter)
        assert counters(agent)["ScrapeFailCount" if scrapes else "ScrapeSuccessCount"] == 0
    finally:
        agent.stop()
    if not scrapes:
        assert "elsewhere.example" in agent.sources["scrape"].target_errors[target.url + "/metrics"]


@pytest.mark.parametrize(
    ("wrong", "words"),
    [("ca", "certificate verify failed"), ("password", "HTTP status 401"), ("scheme", "Connection aborted")],
)
def test_the_wrong_ca_or_password_fails_clearly(
    target: BackgroundServer,
    tls_files: TlsFiles,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    wrong: str,
    words: str,
) -> None:
    keys: dict[str, object] = {
        "scheme": "http" if wrong == "scheme" else "https",
        "tlsCaFile": tls_files.other_ca if wrong == "ca" else tls_files.ca,
        "basicAuthUsername": "prometheus",
        "basicAuthPasswordFile": password_file(tmp_path, "guess" if wrong == "password" else "s3cret"),
    }
    caplog.set_level(logging.WARNING, logger="collector_agent.sources.prometheus")
    agent = scraping(target, **keys)
    try:
        wait_until(lambda: counters(agent)["ScrapeFailCount"] >= 3, 20, "three failed scrapes")
        assert counters(agent)["ScrapeSuccessCount"] == 0
    finally:
        agent.stop()
    warnings = [r.getMessage() for r in caplog.records if "scraping" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert words in warnings[0], warnings[0]


def test_unusable_keys_are_configuration_errors(target: BackgroundServer, tmp_path: Path) -> None:
    cases = {
        "basicAuthPasswordFile": {"basicAuthUsername": "u", "basicAuthPasswordFile": tmp_path / "absent"},
        "tlsCaFile": {"tlsCaFile": tmp_path / "absent.pem"},
        "tlsKeyFile": {"tlsKeyFile": tmp_path / "key.pem"},
        "scheme": {"scheme": "ftp"},
    }
    for key, keys in cases.items():
        with pytest.raises(ConfigurationError, match=rf"a\.sources\.scrape\.{key}"):
            scraping(target, **keys)


def test_empty_values_are_absent_keys(target: BackgroundServer) -> None:
    """``${NAME}`` set to nothing turns a knob off (``artimon up`` without a web config)."""
    agent = scraping(target, tlsCaFile="", basicAuthUsername="", basicAuthPasswordFile="", scheme="https")
    try:
        wait_until(lambda: counters(agent)["ScrapeFailCount"] >= 1, 20, "a failed scrape")
        assert "certificate verify failed" in agent.sources["scrape"].target_errors[target.url + "/metrics"]
    finally:
        agent.stop()
