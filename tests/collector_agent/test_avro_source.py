"""The ``avro`` source and sink between our own agents, and the source's edges: the Avro
handshake's NONE round, limits, garbage, timeouts, a full channel, the IP filter."""

from __future__ import annotations

import contextlib
import io
import re
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import TlsFiles, unstamped, wait_until

from artimon.stack import agent_properties
from collector_agent import (
    Agent,
    ConfigurationError,
    Context,
    Event,
    EventDeliveryException,
    RequestRefusedError,
    load_properties,
)
from collector_agent.avro_ipc import (
    PROTOCOL_MD5,
    PROTOCOL_TEXT,
    check_request,
    decode_events,
    encode_events,
    read_handshake_response,
    read_response,
    write_call,
)
from collector_agent.avro_transport import FrameStream
from collector_agent.flume_limits import RequestLimits
from collector_agent.registry import resolve
from collector_agent.sinks.avro import AvroSink


def receiver_properties(capacity: int = 10_000, **source: object) -> str:
    avro = {"type": "avro", "bind": "127.0.0.1", "port": 0, "channels": "ch", "maxFrameSize": 65536}
    channel = {
        "type": "memory",
        "capacity": capacity,
        "transactionCapacity": min(capacity, 10_000),
        "keep-alive": 0,
    }
    return agent_properties(
        "r",
        sources={"src": {**avro, **source}},
        channels={"ch": channel, "unused": {"type": "memory"}},
        sinks={"k": {"type": "null", "channel": "unused"}},
    )


@pytest.fixture
def streams() -> Iterator[list[FrameStream]]:
    opened: list[FrameStream] = []
    yield opened
    for stream in opened:
        stream.sock.close()


@pytest.fixture
def receiver() -> Iterator[Callable[..., Agent]]:
    started: list[Agent] = []

    def start(capacity: int = 10_000, **source: object) -> Agent:
        agent = Agent.from_properties(receiver_properties(capacity, **source), "r", {})
        agent.start()
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.stop()


def held(agent: Agent) -> list[tuple[dict[str, str], bytes]]:
    with agent.channels["ch"].transaction() as tx:
        return [(unstamped(e.headers, e.body), e.body) for e in tx.take_batch(10_000)]


# Avro's IPC spec's HandshakeRequest, written here from the spec, apart from the code's
_HANDSHAKE_REQUEST = fastavro.parse_schema(
    {
        "type": "record",
        "name": "HandshakeRequest",
        "namespace": "org.apache.avro.ipc",
        "fields": [
            {"name": "clientHash", "type": {"type": "fixed", "name": "MD5", "size": 16}},
            {"name": "clientProtocol", "type": ["null", "string"]},
            {"name": "serverHash", "type": "MD5"},
            {"name": "meta", "type": ["null", {"type": "map", "values": "bytes"}]},
        ],
    }
)


def handshake(client_hash: bytes, protocol: str | None) -> bytes:
    out = io.BytesIO()
    record = {"clientHash": client_hash, "clientProtocol": protocol, "serverHash": PROTOCOL_MD5, "meta": None}
    fastavro.schemaless_writer(out, _HANDSHAKE_REQUEST, record)
    return out.getvalue()


def exchange(stream: FrameStream, message: bytes, serial: int = 1) -> io.BytesIO:
    stream.write(serial, message, time.monotonic() + 5)
    answer_serial, answer = stream.read(1 << 20, time.monotonic() + 5)
    assert answer_serial == serial
    return io.BytesIO(answer)


def batch_call(events: list[Event], prefix: bytes = b"") -> bytes:
    out = io.BytesIO(prefix)
    out.seek(len(prefix))
    write_call(out, "appendBatch", encode_events(events))
    return out.getvalue()


def connect(agent: Agent, streams: list[FrameStream]) -> FrameStream:
    stream = FrameStream(socket.create_connection(("127.0.0.1", agent.sources["src"].port), timeout=5))
    streams.append(stream)
    return stream


def closed(stream: FrameStream) -> bool:
    try:
        stream.read(1 << 20, time.monotonic() + 5)
    except (EOFError, OSError):
        return True
    return False


@pytest.mark.parametrize(("compression", "tls"), [("none", False), ("deflate", False), ("none", True)])
def test_our_sink_to_our_source(
    receiver: Callable[..., Agent], tls_files: TlsFiles, compression: str, tls: bool
) -> None:
    server_tls = {"ssl": "true", "keystore": tls_files.server, "truststore": tls_files.ca} if tls else {}
    client_tls = {"ssl": "true", "keystore": tls_files.client, "truststore": tls_files.ca} if tls else {}
    agent = receiver(**{"compression-type": compression}, **server_tls)
    sink = {
        "type": "avro",
        "hostname": "127.0.0.1",
        "port": agent.sources["src"].port,
        "batch-size": 50,
        "compression-type": compression,
        "channel": "c",
        **client_tls,
    }
    sender = Agent.from_properties(
        agent_properties(
            "s",
            sources={"seq": {"type": "seq", "totalEvents": 0, "channels": "unused"}},
            channels={
                "c": {"type": "memory", "capacity": 1000, "transactionCapacity": 1000},
                "unused": {"type": "memory"},
            },
            sinks={"k": sink},
        ),
        "s",
        {},
    )
    sent = [Event({"n": str(i), "ü": "ß"}, bytes(range(i % 256)) * 3) for i in range(300)]
    sender.start()
    try:
        with sender.channels["c"].transaction() as tx:
            tx.put_batch(sent)
        wait_until(lambda: agent.sources["src"].metrics()["EventAcceptedCount"] == 300, what="300 events")
    finally:
        sender.stop()
    assert held(agent) == [(e.headers, e.body) for e in sent]
    assert agent.sources["src"].metrics()["AppendBatchAcceptedCount"] == 6


def test_a_plain_client_of_a_tls_source_is_refused(
    receiver: Callable[..., Agent], tls_files: TlsFiles
) -> None:
    agent = receiver(ssl="true", keystore=tls_files.server)
    with socket.create_connection(("127.0.0.1", agent.sources["src"].port), timeout=5) as sock:
        sock.sendall(batch_call([Event({}, b"x")], handshake(PROTOCOL_MD5, None)))
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(100) == b""
    wait_until(lambda: agent.sources["src"].metrics()["TlsFailureCount"] == 1, what="counted")


def test_an_unknown_hash_gets_none_then_the_protocol_text_is_accepted(
    receiver: Callable[..., Agent], streams: list[FrameStream]
) -> None:
    agent = receiver()
    stream = connect(agent, streams)
    events = [Event({"h": "1"}, b"body")]
    answer = exchange(stream, batch_call(events, handshake(b"\x01" * 16, None)))
    assert read_handshake_response(answer) == "NONE" and answer.read() == b""  # no call answer
    answer = exchange(stream, batch_call(events, handshake(b"\x01" * 16, PROTOCOL_TEXT)), serial=2)
    assert read_handshake_response(answer) == "BOTH" and read_response(answer) == "OK"
    assert read_response(exchange(stream, batch_call(events), serial=3)) == "OK"  # no handshake now
    assert held(agent) == [({"h": "1"}, b"body")] * 2
    metrics = agent.sources["src"].metrics()
    assert metrics["HandshakeMatchNoneCount"] == 1 and metrics["HandshakeMatchBothCount"] == 1


def test_another_protocol_is_refused(receiver: Callable[..., Agent], streams: list[FrameStream]) -> None:
    agent = receiver()
    stream = connect(agent, streams)
    other = PROTOCOL_TEXT.replace('"appendBatch"', '"appendMany"')
    stream.write(1, batch_call([], handshake(b"\x02" * 16, other)), time.monotonic() + 5)
    assert closed(stream)
    assert agent.sources["src"].metrics()["BadFrameCount"] == 1


def test_a_batch_over_the_limit_is_answered_an_error_and_nothing_is_stored(
    receiver: Callable[..., Agent], streams: list[FrameStream]
) -> None:
    agent = receiver(maxBatchEvents=10)
    stream = connect(agent, streams)
    answer = exchange(stream, batch_call([Event({}, b"x")] * 11, handshake(PROTOCOL_MD5, None)))
    assert read_handshake_response(answer) == "BOTH"
    with pytest.raises(ValueError, match="more than 10 events"):
        read_response(answer)
    assert closed(stream)
    assert held(agent) == [] and agent.sources["src"].metrics()["RequestRefusedCount"] == 1


def test_a_full_channel_answers_failed_and_keeps_nothing(
    receiver: Callable[..., Agent], streams: list[FrameStream]
) -> None:
    agent = receiver(capacity=10)
    stream = connect(agent, streams)
    answer = exchange(stream, batch_call([Event({}, b"x")] * 11, handshake(PROTOCOL_MD5, None)))
    assert read_handshake_response(answer) == "BOTH" and read_response(answer) == "FAILED"
    assert held(agent) == []
    assert read_response(exchange(stream, batch_call([Event({}, b"y")] * 10), serial=2)) == "OK"


@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        struct.pack("!ii", 1, 0),  # a frame of no buffers
        struct.pack("!iii", 1, 1, 1 << 30),  # a buffer over maxFrameSize
        struct.pack("!iii", 1, 1, 8) + b"\xff" * 8,  # not a handshake
    ],
)
def test_garbage_closes_its_connection_only(
    receiver: Callable[..., Agent], garbage: bytes, streams: list[FrameStream]
) -> None:
    agent = receiver()
    with socket.create_connection(("127.0.0.1", agent.sources["src"].port), timeout=5) as sock:
        sock.sendall(garbage)
        assert sock.recv(100) == b""
    assert agent.sources["src"].metrics()["BadFrameCount"] == 1
    stream = connect(agent, streams)
    answer = exchange(stream, batch_call([Event({}, b"ok")], handshake(PROTOCOL_MD5, None)))
    assert read_handshake_response(answer) == "BOTH" and read_response(answer) == "OK"


def test_a_deflate_bomb_is_refused_at_the_frame_limit(receiver: Callable[..., Agent]) -> None:
    agent = receiver(**{"compression-type": "deflate"})
    bomb = zlib.compressobj()
    with socket.create_connection(("127.0.0.1", agent.sources["src"].port), timeout=5) as sock:
        sock.sendall(bomb.compress(struct.pack("!ii", 1, 60_000) + bytes(10_000_000)) + bomb.flush())
        assert sock.recv(100) == b""
    assert agent.sources["src"].metrics()["BadFrameCount"] == 1


def test_a_silent_connection_is_closed(receiver: Callable[..., Agent]) -> None:
    agent = receiver(firstFrameTimeout=0.3)
    with socket.create_connection(("127.0.0.1", agent.sources["src"].port), timeout=5) as sock:
        assert sock.recv(100) == b""
    wait_until(lambda: agent.sources["src"].metrics()["SilentConnectionClosedCount"] == 1, what="counted")


def test_the_ip_filter_refuses_a_denied_peer(receiver: Callable[..., Agent]) -> None:
    agent = receiver(ipFilter="true", ipFilterRules="allow:ip:10.*,deny:ip:127.*")
    with socket.create_connection(("127.0.0.1", agent.sources["src"].port), timeout=5) as sock:
        assert sock.recv(100) == b""
    wait_until(lambda: agent.sources["src"].metrics()["ConnectionFilteredCount"] == 1, what="counted")


@pytest.mark.parametrize("kind", ["source", "sink"])
def test_deflate_with_ssl_is_refused(tls_files: TlsFiles, kind: str) -> None:
    """Flume's client runs TLS inside the zlib stream: the pair is refused by name."""
    keys = {"type": "avro", "compression-type": "deflate", "ssl": "true", "keystore": tls_files.server}
    source = {"bind": "127.0.0.1", "port": 0, "channels": "c", **keys} if kind == "source" else None
    sink = {"hostname": "127.0.0.1", "port": 9, "channel": "c", **keys} if kind == "sink" else None
    properties = agent_properties(
        "a1",
        sources={"s": source or {"type": "seq", "totalEvents": 0, "channels": "c"}},
        channels={"c": {"type": "memory"}},
        sinks={"k": sink or {"type": "null", "channel": "c"}},
    )
    with pytest.raises(ConfigurationError, match=r"compression-type.*TLS inside the zlib stream"):
        Agent.from_properties(properties, "a1", {})


def test_the_avro_example_of_the_docs_configures() -> None:
    """The ``avro`` example of docs/agent.md builds an agent, every key known."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "agent.md").read_text()
    (block,) = [b for b in re.findall(r"```properties\n(.*?)```", page, re.S) if "type = avro" in b]
    Agent.from_properties(block, "a1", {})  # every key known, every value valid
    values = load_properties(block)

    def configured(kind: str, name: str) -> Any:
        prefix = f"a1.{kind}s.{name}."
        context = Context({k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)}, prefix)
        component = resolve(kind, context.get_str("type"), f"{prefix}type")(name)
        component.configure(context)
        return component

    source, sink = configured("source", "r1"), configured("sink", "k1")
    assert source.deflate and source.limits.max_connections == 16
    assert source.allow("127.0.0.1") and not source.allow("10.0.0.1")
    assert sink.batch_size == 500 and sink.reset_interval == 300 and sink.deflate


_VALID = batch_call([Event({"k": "v", "ü": ""}, b"body"), Event({}, b"")] * 3)


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    """Bytes of no shape, or a valid request with some bytes changed, cut or added."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=200))
    data = bytearray(_VALID)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data) - 1))
        data[at : at + draw(st.integers(0, 3))] = draw(st.binary(max_size=3))
        if not data:
            break
    return bytes(data)


@given(requests())
@settings(max_examples=400, deadline=None)
def test_a_request_is_refused_by_name_or_decodes_within_its_limits(data: bytes) -> None:
    limits = RequestLimits(max_batch_events=8, max_decoded_bytes=4096)
    try:
        name, params = check_request(data, 0, limits)
    except RequestRefusedError:
        return
    try:
        events = decode_events(data, params, name) if name else []
    except UnicodeDecodeError:  # strings are checked as bytes; their UTF-8 by the decoder
        return
    assert len(events) <= limits.max_batch_events


def test_a_newcomer_closes_the_idlest_connection_when_the_source_is_full(
    receiver: Callable[..., Agent], streams: list[FrameStream]
) -> None:
    agent = receiver(threads=2)
    silent = [connect(agent, streams) for _ in range(2)]
    wait_until(lambda: agent.sources["src"].metrics()["OpenConnectionCount"] == 2, what="two connections")
    stream = connect(agent, streams)
    answer = exchange(stream, batch_call([Event({}, b"in")], handshake(PROTOCOL_MD5, None)))
    assert read_handshake_response(answer) == "BOTH" and read_response(answer) == "OK"
    assert closed(silent[0]) and agent.sources["src"].metrics()["ConnectionEvictedCount"] == 1


@pytest.mark.parametrize(
    "answer", [None, b"\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x04\xff\xff\xff\xff"]
)
def test_the_sink_fails_a_batch_on_a_silent_or_garbled_next_hop(answer: bytes | None) -> None:
    accepted: list[socket.socket] = []

    def next_hop(server: socket.socket) -> None:
        accepted.append(server.accept()[0])
        if answer is not None:
            accepted[0].sendall(answer)

    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(5)
        hop = threading.Thread(target=next_hop, args=(server,), daemon=True)
        hop.start()
        sink = AvroSink("k")
        sink.configure(
            Context(
                {"hostname": "127.0.0.1", "port": str(server.getsockname()[1]), "request-timeout": "300"},
                "k.",
            )
        )
        try:
            with pytest.raises(EventDeliveryException, match="appendBatch failed"):
                sink.deliver([Event({}, b"x")])
        finally:
            sink.stop()
            hop.join(5)
            for sock in accepted:
                sock.close()
        assert sink.metrics()["ConnectionClosedCount"] >= 1
