"""TLS on the agent's Thrift hops, configured by properties: the Thrift sink to the Thrift
source (mutual TLS), the artimon source to a TLS endpoint, and what a plain client or a bad
configuration gets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support import TlsFiles

from artimon.stack import agent_properties
from bookkeeper import Bookkeeper
from bookkeeper.wire import server_context
from collector_agent import Agent, ConfigurationError


def receiver_properties(files: TlsFiles) -> str:
    """A Thrift source that asks its clients for a certificate, into a channel nobody drains."""
    source = {
        "type": "thrift",
        "bind": "127.0.0.1",
        "port": 0,
        "channels": "ch",
        "ssl": "true",
        "keystore": files.server,
        "truststore": files.ca,
    }
    return agent_properties(
        "r",
        sources={"src": source},
        channels={
            "ch": {"type": "memory", "capacity": 10000, "transactionCapacity": 1000},
            "unused": {"type": "memory"},
        },
        sinks={"k": {"type": "null", "channel": "unused"}},
    )


def sender_properties(port: int, **tls: object) -> str:
    """500 events into a Thrift sink to ``port``, with the sink's ``tls`` keys."""
    sink = {
        "type": "thrift",
        "channel": "ch",
        "hostname": "127.0.0.1",
        "port": port,
        "batchSize": 100,
        "request-timeout": 5000,
        "maxBackoffSleep": 200,
        **tls,
    }
    return agent_properties(
        "s",
        sources={"gen": {"type": "seq", "batchSize": 100, "totalEvents": 500, "channels": "ch"}},
        channels={"ch": {"type": "memory", "capacity": 10000, "transactionCapacity": 1000}},
        sinks={"out": sink},
    )


def test_the_thrift_sink_talks_to_the_thrift_source_over_mutual_tls(
    tls_files: TlsFiles, wait: Callable[..., None]
) -> None:
    receiver = Agent.from_properties(receiver_properties(tls_files), "r", {})
    receiver.start()
    port = receiver.sources["src"].port  # type: ignore[attr-defined]
    tls = {"ssl": "true", "truststore": tls_files.ca, "keystore": tls_files.client}
    sender = Agent.from_properties(sender_properties(port, **tls), "s", {})
    sender.start()
    try:
        wait(lambda: receiver.channels["ch"].size == 500, 30, "500 events over TLS")  # type: ignore[attr-defined]
    finally:
        sender.stop()
    metrics = receiver.metrics()["SOURCE.src"]
    receiver.stop()
    assert metrics["TlsFailureCount"] == 0 and metrics["EventAcceptedCount"] == 500


def test_a_plain_sink_and_a_sink_without_a_client_certificate_are_refused_and_counted(
    tls_files: TlsFiles, wait: Callable[..., None]
) -> None:
    receiver = Agent.from_properties(receiver_properties(tls_files), "r", {})
    receiver.start()
    port = receiver.sources["src"].port  # type: ignore[attr-defined]
    try:
        for tls in ({}, {"ssl": "true", "truststore": tls_files.ca}):
            sender = Agent.from_properties(sender_properties(port, **tls), "s", {})
            sender.start()
            try:
                wait(lambda s=sender: s.metrics()["SINK.out"]["EventWriteFail"] >= 2, 30, "failed deliveries")
            finally:
                sender.stop()
        wait(lambda: receiver.metrics()["SOURCE.src"]["TlsFailureCount"] >= 4, 10, "the refusals counted")
        assert receiver.channels["ch"].size == 0  # type: ignore[attr-defined]
        assert receiver.metrics()["SOURCE.src"]["OpenConnectionCount"] == 0
    finally:
        receiver.stop()


def poller_properties(zk: str, ca: Path) -> str:
    """An artimon source polling over TLS every second, into a channel nobody drains."""
    poll = {"type": "artimon", "zk": zk, "interval": 1, "channels": "ch", "ssl": "true", "truststore": ca}
    return agent_properties(
        "p",
        sources={"poll": poll},
        channels={"ch": {"type": "memory", "capacity": 1000}, "idle": {"type": "memory"}},
        sinks={"none": {"type": "null", "channel": "idle"}},
    )


def test_the_artimon_source_polls_a_tls_endpoint(
    tls_files: TlsFiles, zk_hosts: str, wait: Callable[..., None]
) -> None:
    bk = Bookkeeper("secure", environ={})
    bk.integer("secret").set(7)
    server = bk.serve(zk_hosts=zk_hosts, ssl_context=server_context(tls_files.server))
    agent = Agent.from_properties(poller_properties(zk_hosts, tls_files.ca), "p", {})
    agent.start()
    try:
        wait(lambda: agent.channels["ch"].size >= 2, 30, "two rounds polled over TLS")  # type: ignore[attr-defined]
        metrics = agent.sources["poll"].metrics()
    finally:
        agent.stop()
        bk.close()
    assert metrics["PollFailCount"] == 0
    assert server.stats["connections"] == 1  # kept alive across rounds
    assert "tls_failures" not in server.stats


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("ssl = true", r"r\.sources\.src\.keystore: is required"),
        ("ssl = true\nr.sources.src.keystore = {server}\nr.sources.src.keystore-type = JKS", "only PEM"),
        (
            "ssl = true\nr.sources.src.keystore = /nonexistent/server.pem",
            r"r\.sources\.src\.ssl: .*server\.pem",
        ),
        ("ssl = maybe", r"r\.sources\.src\.ssl"),
    ],
)
def test_tls_keys_are_checked_when_the_configuration_is_read(
    tls_files: TlsFiles, keys: str, message: str
) -> None:
    config = receiver_properties(tls_files)
    config = "\n".join(line for line in config.splitlines() if ".ssl" not in line and ".keystore" not in line)
    config += "\nr.sources.src." + keys.format(server=tls_files.server) + "\n"
    with pytest.raises(ConfigurationError, match=message):
        Agent.from_properties(config, "r", {})
