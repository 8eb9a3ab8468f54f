"""TLS on the agent's Thrift hops, configured by properties: the Thrift sink to the Thrift
source (mutual TLS), the artimon source to a TLS endpoint, and what a plain client or a bad
configuration gets."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from support import TlsFiles

from bookkeeper import Bookkeeper
from bookkeeper.wire import server_context
from collector_agent import Agent, ConfigurationError

RECEIVER = """
r.sources = src
r.channels = ch
r.sinks = k
r.sources.src.type = thrift
r.sources.src.bind = 127.0.0.1
r.sources.src.port = 0
r.sources.src.channels = ch
r.sources.src.ssl = true
r.sources.src.keystore = {server}
r.sources.src.truststore = {ca}
r.channels.ch.type = memory
r.channels.ch.capacity = 10000
r.channels.ch.transactionCapacity = 1000
r.sinks.k.type = null
r.sinks.k.channel = unused
r.channels = ch unused
r.channels.unused.type = memory
"""

SENDER = """
s.sources = gen
s.channels = ch
s.sinks = out
s.sources.gen.type = seq
s.sources.gen.batchSize = 100
s.sources.gen.totalEvents = 500
s.sources.gen.channels = ch
s.channels.ch.type = memory
s.channels.ch.capacity = 10000
s.channels.ch.transactionCapacity = 1000
s.sinks.out.type = thrift
s.sinks.out.channel = ch
s.sinks.out.hostname = 127.0.0.1
s.sinks.out.port = {port}
s.sinks.out.batchSize = 100
s.sinks.out.request-timeout = 5000
s.sinks.out.maxBackoffSleep = 200
{tls}
"""


def test_the_thrift_sink_talks_to_the_thrift_source_over_mutual_tls(
    tls_files: TlsFiles, wait: Callable[..., None]
) -> None:
    receiver = Agent.from_properties(RECEIVER.format(server=tls_files.server, ca=tls_files.ca), "r", {})
    receiver.start()
    port = receiver.sources["src"].port  # type: ignore[attr-defined]
    tls = (
        f"s.sinks.out.ssl = true\ns.sinks.out.truststore = {tls_files.ca}\n"
        f"s.sinks.out.keystore = {tls_files.client}\n"
    )
    sender = Agent.from_properties(SENDER.format(port=port, tls=tls), "s", {})
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
    receiver = Agent.from_properties(RECEIVER.format(server=tls_files.server, ca=tls_files.ca), "r", {})
    receiver.start()
    port = receiver.sources["src"].port  # type: ignore[attr-defined]
    try:
        for tls in ("", f"s.sinks.out.ssl = true\ns.sinks.out.truststore = {tls_files.ca}\n"):
            sender = Agent.from_properties(SENDER.format(port=port, tls=tls), "s", {})
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


POLLER = """
p.sources = poll
p.channels = ch
p.sinks = none
p.sources.poll.type = artimon
p.sources.poll.zk = {zk}
p.sources.poll.interval = 1
p.sources.poll.channels = ch
p.sources.poll.ssl = true
p.sources.poll.truststore = {ca}
p.channels.ch.type = memory
p.channels.ch.capacity = 1000
p.channels.idle.type = memory
p.channels = ch idle
p.sinks.none.type = null
p.sinks.none.channel = idle
"""


def test_the_artimon_source_polls_a_tls_endpoint(
    tls_files: TlsFiles, zk_hosts: str, wait: Callable[..., None]
) -> None:
    bk = Bookkeeper("secure", environ={})
    bk.integer("secret").set(7)
    server = bk.serve(zk_hosts=zk_hosts, ssl_context=server_context(tls_files.server))
    agent = Agent.from_properties(POLLER.format(zk=zk_hosts, ca=tls_files.ca), "p", {})
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
    config = RECEIVER.format(server=tls_files.server, ca=tls_files.ca)
    config = "\n".join(line for line in config.splitlines() if ".ssl" not in line and ".keystore" not in line)
    config += "\nr.sources.src." + keys.format(server=tls_files.server) + "\n"
    with pytest.raises(ConfigurationError, match=message):
        Agent.from_properties(config, "r", {})
