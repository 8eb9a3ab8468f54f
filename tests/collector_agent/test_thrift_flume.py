"""Agent to agent over Flume's Thrift protocol, and a peer we did not write: a client
generated from Flume's IDL by the Apache Thrift compiler, on the official thrift library."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator

import pytest
from flume_gen import ThriftSourceProtocol
from flume_gen.ttypes import Status, ThriftFlumeEvent
from support import unstamped
from thrift.protocol import TBinaryProtocol, TCompactProtocol
from thrift.transport import TSocket, TTransport

from artimon.stack import agent_properties
from collector_agent import Agent, ConfigurationError


def receiver_properties(capacity: int = 10000, port: int = 0, **source: object) -> str:
    """A Thrift source (with the ``source`` keys) on ``port`` into a channel nobody drains."""
    thrift = {"type": "thrift", "bind": "127.0.0.1", "port": port, "channels": "ch", "maxFrameSize": 65536}
    channel = {"type": "memory", "capacity": capacity, "transactionCapacity": capacity, "keep-alive": 0}
    return agent_properties(
        "r",
        sources={"src": {**thrift, **source}},
        channels={"ch": channel, "unused": {"type": "memory"}},
        sinks={"k": {"type": "null", "channel": "unused"}},
    )


@pytest.fixture
def receiver() -> Iterator[Callable[..., Agent]]:
    started: list[Agent] = []

    def start(capacity: int = 10000, **source: object) -> Agent:
        agent = Agent.from_properties(receiver_properties(capacity, **source), "r", {})
        agent.start()
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.stop()


def held(agent: Agent) -> list[tuple[dict[str, str], bytes]]:
    with agent.channels["ch"].transaction() as tx:
        return [(unstamped(e.headers, e.body), e.body) for e in tx.take_batch(100_000)]


def official_client(
    port: int, compact: bool = True
) -> tuple[ThriftSourceProtocol.Client, TTransport.TFramedTransport]:
    transport = TTransport.TFramedTransport(TSocket.TSocket("127.0.0.1", port))
    protocol = (TCompactProtocol.TCompactProtocol if compact else TBinaryProtocol.TBinaryProtocol)(transport)
    transport.open()
    return ThriftSourceProtocol.Client(protocol), transport


def test_an_official_thrift_client_compact_framed_talks_to_our_source(receiver: Callable[..., Agent]) -> None:
    agent = receiver()
    client, transport = official_client(agent.sources["src"].port)
    try:
        assert client.append(ThriftFlumeEvent(headers={"h": "1"}, body=b"single")) == Status.OK
        batch = [ThriftFlumeEvent(headers={"n": str(i)}, body=bytes([i]) * 10) for i in range(50)]
        assert client.appendBatch(batch) == Status.OK
    finally:
        transport.close()
    got = held(agent)
    assert got[0] == ({"h": "1"}, b"single")
    assert got[1:] == [({"n": str(i)}, bytes([i]) * 10) for i in range(50)]
    metrics = agent.metrics()["SOURCE.src"]
    assert metrics["AppendAcceptedCount"] == 1 and metrics["AppendBatchAcceptedCount"] == 1
    assert metrics["EventAcceptedCount"] == 51


def test_binary_protocol_option(receiver: Callable[..., Agent]) -> None:
    agent = receiver(protocol="binary")
    client, transport = official_client(agent.sources["src"].port, compact=False)
    try:
        assert client.appendBatch([ThriftFlumeEvent(headers={}, body=b"b")]) == Status.OK
    finally:
        transport.close()
    assert held(agent) == [({}, b"b")]


def test_a_full_channel_answers_failed_and_keeps_nothing(receiver: Callable[..., Agent]) -> None:
    agent = receiver(capacity=3)
    client, transport = official_client(agent.sources["src"].port)
    try:
        assert client.appendBatch([ThriftFlumeEvent({}, b"1"), ThriftFlumeEvent({}, b"2")]) == Status.OK
        assert client.appendBatch([ThriftFlumeEvent({}, b"3"), ThriftFlumeEvent({}, b"4")]) == Status.FAILED
    finally:
        transport.close()
    assert [b for _, b in held(agent)] == [b"1", b"2"]
    assert agent.metrics()["SOURCE.src"]["ChannelWriteFail"] == 1


@pytest.mark.parametrize(
    "garbage",
    [b"\x00\x00\x00\x05hello", struct.pack("!i", 10**8) + b"x" * 100, b"\xff" * 64, b"\x00\x00\x00\x00"],
)
def test_garbage_loses_its_connection_and_the_source_keeps_serving(
    receiver: Callable[..., Agent], garbage: bytes
) -> None:
    agent = receiver()
    port = agent.sources["src"].port
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(garbage)
            sock.shutdown(socket.SHUT_WR)
            closed = sock.recv(100) == b""
        except TimeoutError:
            closed = False
        except OSError:
            closed = True
    assert closed
    client, transport = official_client(port)
    try:
        assert client.append(ThriftFlumeEvent({}, b"after")) == Status.OK
    finally:
        transport.close()
    assert held(agent) == [({}, b"after")]


def sender_properties(port: int, total: int = 2000, batch_key: str = "batchSize") -> str:
    """``total`` events, tagged ``from=s``, into a Thrift sink to ``port`` taking 500 a batch
    (``batch_key``: ours, ``batchSize``, or Flume's, ``batch-size``)."""
    seq = {
        "type": "seq",
        "batchSize": 100,
        "totalEvents": total,
        "channels": "ch",
        "interceptors": "tag",
        "interceptors.tag.type": "static",
        "interceptors.tag.key": "from",
        "interceptors.tag.value": "s",
    }
    thrift = {
        "type": "thrift",
        "channel": "ch",
        "hostname": "127.0.0.1",
        "port": port,
        batch_key: 500,
        "request-timeout": 5000,
        "maxBackoffSleep": 200,
    }
    return agent_properties(
        "s",
        sources={"gen": seq},
        channels={"ch": {"type": "memory", "capacity": 10000, "transactionCapacity": 1000}},
        sinks={"out": thrift},
    )


@pytest.mark.parametrize("batch_key", ["batchSize", "batch-size"])
def test_our_thrift_sink_to_our_thrift_source(
    receiver: Callable[..., Agent], wait: Callable[..., None], batch_key: str
) -> None:
    downstream = receiver()
    sender = Agent.from_properties(
        sender_properties(downstream.sources["src"].port, batch_key=batch_key), "s", {}
    )
    sender.start()
    assert sender.sinks["out"].batch_size == 500  # type: ignore[attr-defined]
    try:
        wait(lambda: downstream.channels["ch"].size == 2000, what="2000 events downstream")
    finally:
        sender.stop()
    got = held(downstream)
    assert [int(body) for _, body in got] == list(range(2000))
    assert all(headers == {"from": "s"} for headers, _ in got)
    assert sender.metrics()["SINK.out"]["ConnectionCreatedCount"] == 1


def test_the_sink_refuses_both_batch_keys() -> None:
    properties = sender_properties(9, batch_key="batch-size") + "s.sinks.out.batchSize = 500\n"
    with pytest.raises(ConfigurationError, match="batch-size: and batchSize both set"):
        Agent.from_properties(properties, "s", {})


def test_the_sink_keeps_events_while_the_next_hop_is_down_and_delivers_later(
    receiver: Callable[..., Agent], wait: Callable[..., None]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sender = Agent.from_properties(sender_properties(port, total=300), "s", {})
    sender.start()
    try:
        wait(lambda: sender.metrics()["SINK.out"]["ConnectionFailedCount"] >= 2, what="failed connects")
        assert sender.channels["ch"].size == 300
        downstream = Agent.from_properties(receiver_properties(port=port), "r", {})
        downstream.start()
        try:
            wait(lambda: downstream.channels["ch"].size == 300, timeout=30, what="delivery after the outage")
        finally:
            downstream.stop()
    finally:
        sender.stop()
