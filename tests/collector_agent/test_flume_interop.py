"""Agent to agent over Avro and Thrift with the real Apache Flume 1.11.0 agent on the other
side, each way counting every event: 0 lost, 0 duplicated, headers and bodies byte-identical
(Avro with ``compression-type = deflate`` one way), and Avro over TLS both ways: Flume's sink
trusting our CA from a PKCS12 trust store (``keytool -importcert``), Flume's source serving
the same server certificate from a PKCS12 key store, ours reading the PEM files."""

from __future__ import annotations

import random
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import fastavro
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, load_pem_private_key, pkcs12
from support import TlsFiles, unstamped, wait_until

from artimon.servers import FlumeAgent, free_port
from artimon.stack import agent_properties
from collector_agent import Agent, Event

pytestmark = pytest.mark.slow

EVENTS = 100_000
# Per protocol: keys of our source and Flume's sink (Flume -> us), of our sink (us -> Flume).
_TO_US: dict[str, dict[str, object]] = {"avro": {"compression-type": "deflate"}, "thrift": {}}
_MEMORY = {"type": "memory", "capacity": 2 * EVENTS, "transactionCapacity": 10_000, "keep-alive": 0}
# (protocol, TLS): plain Avro and Thrift, and Avro over TLS
_CASES = [("avro", False), ("thrift", False), ("avro", True)]
_IDS = ["avro", "thrift", "avro-tls"]
_STORE_PASSWORD = "flume-interop"


def java_stores(files: TlsFiles, directory: Path) -> tuple[Path, Path]:
    """Java's side of ``files``: the server's key and certificate chain as a PKCS12 key store,
    the CA as a PKCS12 trust store made by ``keytool``, both with :data:`_STORE_PASSWORD`."""
    pem = files.server.read_bytes()
    key = load_pem_private_key(pem, None)
    leaf, *chain = x509.load_pem_x509_certificates(pem)
    password = _STORE_PASSWORD.encode()
    keystore, truststore = directory / "server.p12", directory / "trust.p12"
    keystore.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"server",
            key,
            leaf,
            chain or None,
            BestAvailableEncryption(password),  # type: ignore[arg-type]
        )
    )
    keytool = ["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(files.ca)]
    store = ["-keystore", str(truststore), "-storetype", "PKCS12", "-storepass", _STORE_PASSWORD]
    subprocess.run([*keytool, *store], check=True, capture_output=True, timeout=120)
    return keystore, truststore


def tls_keys(
    request: pytest.FixtureRequest, directory: Path, tls: bool, serving: bool
) -> tuple[dict[str, object], dict[str, object]]:
    """With ``tls``: the TLS keys of our component, ``serving`` (a source with the server's
    PEM file) or not (a sink trusting the CA), and of Flume's (a source's PKCS12 key store and
    a sink's PKCS12 trust store: each ignores the other's keys)."""
    if not tls:
        return {}, {}
    files: TlsFiles = request.getfixturevalue("tls_files")
    directory.mkdir()
    keystore, truststore = java_stores(files, directory)
    ours = {"ssl": "true", **({"keystore": files.server} if serving else {"truststore": files.ca})}
    theirs = {
        "ssl": "true",
        "keystore": keystore,
        "keystore-password": _STORE_PASSWORD,
        "keystore-type": "PKCS12",
        "truststore": truststore,
        "truststore-password": _STORE_PASSWORD,
        "truststore-type": "PKCS12",
    }
    return ours, theirs


def flume_properties(sources: dict[str, dict[str, object]], sinks: dict[str, dict[str, object]]) -> str:
    """Flume's agent ``a1`` with one memory channel ``c``: the same properties text as ours."""
    return agent_properties("a1", sources=sources, channels={"c": _MEMORY}, sinks=sinks)


@pytest.fixture
def agents() -> Iterator[list[Agent | FlumeAgent]]:
    started: list[Agent | FlumeAgent] = []
    yield started
    for agent in reversed(started):
        agent.stop()


def drain(agent: Agent, channel: str) -> list[Event]:
    taken: list[Event] = []
    while True:
        with agent.channels[channel].transaction() as tx:
            batch = tx.take_batch(10_000)
        if not batch:
            return taken
        taken += batch


@pytest.mark.parametrize(("rpc", "tls"), _CASES, ids=_IDS)
def test_flumes_sink_to_our_source(
    tmp_path: Path, agents: list[Agent | FlumeAgent], request: pytest.FixtureRequest, rpc: str, tls: bool
) -> None:
    ours_tls, flume_tls = tls_keys(request, tmp_path / "tls", tls, serving=True)
    to_us = {} if tls else _TO_US[rpc]  # deflate with ssl is refused (collector_agent.avro_transport)
    source = {"type": rpc, "bind": "127.0.0.1", "port": 0, "channels": "ch", **to_us, **ours_tls}
    ours = Agent.from_properties(
        agent_properties(
            "r",
            sources={"src": source},
            channels={"ch": _MEMORY, "unused": {"type": "memory"}},
            sinks={"k": {"type": "null", "channel": "unused"}},
        ),
        "r",
        {},
    )
    ours.start()
    agents.append(ours)
    port = ours.sources["src"].port
    flume = FlumeAgent(
        tmp_path / "flume",
        flume_properties(
            sources={
                "seq": {
                    "type": "seq",
                    "totalEvents": EVENTS,
                    "batchSize": 1000,
                    "channels": "c",
                    "interceptors": "i1",
                    "interceptors.i1.type": "static",
                    "interceptors.i1.key": "origin",
                    "interceptors.i1.value": "flume-v\\u00e4lue",
                }
            },
            sinks={
                "k": {
                    "type": rpc,
                    "hostname": "127.0.0.1",
                    "port": port,
                    "batch-size": 1000,
                    "channel": "c",
                    **to_us,
                    **flume_tls,
                }
            },
        ),
    )
    agents.append(flume.start())
    metrics = ours.sources["src"].metrics
    wait_until(lambda: metrics()["EventAcceptedCount"] >= EVENTS, timeout=120, what=f"{EVENTS} events")
    wait_until(lambda: flume.counter("SINK.k", "EventDrainSuccessCount") >= EVENTS, what="Flume's sink done")
    got = drain(ours, "ch")
    bodies = Counter(e.body for e in got)
    assert len(got) == EVENTS and set(bodies) == {str(n).encode() for n in range(EVENTS)}
    assert all(unstamped(e.headers, e.body) == {"origin": "flume-välue"} for e in got)  # stamped here
    counts = metrics()
    assert counts["BadFrameCount"] == counts["RequestRefusedCount"] == counts["TlsFailureCount"] == 0
    if rpc == "avro":  # Flume's client sent our protocol's MD5
        assert counts["HandshakeMatchBothCount"] >= 1 and counts["HandshakeMatchNoneCount"] == 0


def our_events() -> list[Event]:
    rng = random.Random(30)
    return [
        Event({"n": str(i), "tag": "välue-ß", "empty": ""}, rng.randbytes(1 + i % 200) + b"\n\x00")
        for i in range(EVENTS)
    ]


@pytest.mark.parametrize(("rpc", "tls"), _CASES, ids=_IDS)
def test_our_sink_to_flumes_source_and_file_roll(
    tmp_path: Path, agents: list[Agent | FlumeAgent], request: pytest.FixtureRequest, rpc: str, tls: bool
) -> None:
    ours_tls, flume_tls = tls_keys(request, tmp_path / "tls", tls, serving=False)
    port, landing = free_port(), tmp_path / "landing"
    landing.mkdir()
    flume = FlumeAgent(
        tmp_path / "flume",
        flume_properties(
            sources={"r": {"type": rpc, "bind": "127.0.0.1", "port": port, "channels": "c", **flume_tls}},
            sinks={
                "k": {
                    "type": "file_roll",
                    "channel": "c",
                    "sink.directory": landing,
                    "sink.rollInterval": 0,
                    "sink.serializer": "avro_event",
                    "sink.batchSize": 1000,
                }
            },
        ),
        ports=[port],
    )
    agents.append(flume.start())
    sink = {
        "type": rpc,
        "hostname": "127.0.0.1",
        "port": port,
        "channel": "c",
        "batch-size": 1000,
        **ours_tls,
    }
    ours = Agent.from_properties(
        agent_properties(
            "s",
            sources={"seq": {"type": "seq", "totalEvents": 0, "channels": "unused"}},
            channels={"c": _MEMORY, "unused": {"type": "memory"}},
            sinks={"k": sink},
        ),
        "s",
        {},
    )
    ours.start()
    agents.append(ours)
    sent = our_events()
    for start in range(0, EVENTS, 10_000):
        with ours.channels["c"].transaction() as tx:
            tx.put_batch(sent[start : start + 10_000])
    # the channel's count, not the source's: Flume 1.11's thrift source under-counts accepted
    # batches under load (a run logged 74,000 accepted, 100,000 put in its channel)
    counters = (("CHANNEL.c", "EventPutSuccessCount"), ("SINK.k", "EventDrainSuccessCount"))
    wait_until(lambda: all(flume.counter(*c) >= EVENTS for c in counters), timeout=120, what="file_roll")
    assert [flume.counter(*c) for c in counters] == [EVENTS, EVENTS]
    flume.stop()
    landed = []
    for path in sorted(landing.iterdir()):
        with open(path, "rb") as file:
            landed += [(r["headers"], r["body"]) for r in fastavro.reader(file)]  # type: ignore[index, call-overload]
    assert sorted(landed, key=lambda pair: int(pair[0]["n"])) == [(e.headers, e.body) for e in sent]
    if rpc == "avro":
        assert ours.sinks["k"].metrics()["HandshakeMatchNoneCount"] == 0  # Flume knew our MD5
