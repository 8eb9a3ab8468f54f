"""Agent to agent over Flume's Thrift protocol, and a peer we did not write: a client
generated from Flume's IDL by the Apache Thrift compiler, on the official thrift library."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator

import pytest
from flume_gen import ThriftSourceProtocol
from flume_gen.ttypes import Status, ThriftFlumeEvent
from thrift.protocol import TBinaryProtocol, TCompactProtocol
from thrift.transport import TSocket, TTransport

from collector_agent import Agent

RECEIVER = """
r.sources = src
r.channels = ch
r.sinks = k
r.sources.src.type = thrift
r.sources.src.bind = 127.0.0.1
r.sources.src.port = 0
r.sources.src.channels = ch
r.sources.src.maxFrameSize = 65536
{protocol}
r.channels.ch.type = memory
r.channels.ch.capacity = {capacity}
r.channels.ch.transactionCapacity = {capacity}
r.channels.ch.keep-alive = 0
r.sinks.k.type = null
r.sinks.k.channel = unused
r.channels = ch unused
r.channels.unused.type = memory
"""


@pytest.fixture
def receiver() -> Iterator[Callable[..., Agent]]:
    started: list[Agent] = []

    def start(capacity: int = 10000, protocol: str = "") -> Agent:
        agent = Agent.from_properties(RECEIVER.format(capacity=capacity, protocol=protocol), "r", {})
        agent.start()
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.stop()


def held(agent: Agent) -> list[tuple[dict[str, str], bytes]]:
    with agent.channels["ch"].transaction() as tx:
        return [(e.headers, e.body) for e in tx.take_batch(100_000)]


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
    agent = receiver(protocol="r.sources.src.protocol = binary")
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


SENDER = """
s.sources = gen
s.channels = ch
s.sinks = out
s.sources.gen.type = seq
s.sources.gen.batchSize = 100
s.sources.gen.totalEvents = 2000
s.sources.gen.channels = ch
s.sources.gen.interceptors = tag
s.sources.gen.interceptors.tag.type = static
s.sources.gen.interceptors.tag.key = from
s.sources.gen.interceptors.tag.value = s
s.channels.ch.type = memory
s.channels.ch.capacity = 10000
s.channels.ch.transactionCapacity = 1000
s.sinks.out.type = thrift
s.sinks.out.channel = ch
s.sinks.out.hostname = 127.0.0.1
s.sinks.out.port = {port}
s.sinks.out.batchSize = 500
s.sinks.out.request-timeout = 5000
s.sinks.out.maxBackoffSleep = 200
"""


def test_our_thrift_sink_to_our_thrift_source(
    receiver: Callable[..., Agent], wait: Callable[..., None]
) -> None:
    downstream = receiver()
    sender = Agent.from_properties(SENDER.format(port=downstream.sources["src"].port), "s", {})
    sender.start()
    try:
        wait(lambda: downstream.channels["ch"].size == 2000, what="2000 events downstream")
    finally:
        sender.stop()
    got = held(downstream)
    assert [int(body) for _, body in got] == list(range(2000))
    assert all(headers == {"from": "s"} for headers, _ in got)
    assert sender.metrics()["SINK.out"]["ConnectionCreatedCount"] == 1


def test_the_sink_keeps_events_while_the_next_hop_is_down_and_delivers_later(
    receiver: Callable[..., Agent], wait: Callable[..., None]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sender = Agent.from_properties(
        SENDER.format(port=port).replace("totalEvents = 2000", "totalEvents = 300"), "s", {}
    )
    sender.start()
    try:
        wait(lambda: sender.metrics()["SINK.out"]["ConnectionFailedCount"] >= 2, what="failed connects")
        assert sender.channels["ch"].size == 300
        config = RECEIVER.format(capacity=10000, protocol="").replace("port = 0", f"port = {port}")
        downstream = Agent.from_properties(config, "r", {})
        downstream.start()
        try:
            wait(lambda: downstream.channels["ch"].size == 300, timeout=30, what="delivery after the outage")
        finally:
            downstream.stop()
    finally:
        sender.stop()
