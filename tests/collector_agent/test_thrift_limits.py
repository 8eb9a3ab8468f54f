"""The Flume Thrift source checks every request before decoding it: required fields, events
per batch and decoded bytes, from the counts a frame declares; and an agent attacked with
generated frames (huge declared counts and sizes, both protocols) stays small, quick, and
serving, its own polling rounds on time."""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support import cpu_seconds, vm_rss_kb, wait_until
from thriftpy2.protocol import TCompactProtocolFactory, TCyBinaryProtocolFactory

from artimon.servers import free_port
from artimon.stack import agent_properties
from artimon.testing import start_agent_process
from bookkeeper import MalformedFrameError
from bookkeeper.testing import AppProcess, start_app
from bookkeeper.wire import FramedClient
from collector_agent import Agent
from collector_agent._flume_thrift import flume_thrift

Event = flume_thrift.ThriftFlumeEvent
OK = flume_thrift.Status.OK


@pytest.fixture
def receiver() -> Iterator[Callable[..., Agent]]:
    started: list[Agent] = []

    def start(**keys: object) -> Agent:
        """A Thrift source with these ``keys``, into a channel nobody drains."""
        source = {"type": "thrift", "bind": "127.0.0.1", "port": 0, "channels": "ch", **keys}
        properties = agent_properties(
            "r",
            sources={"src": source},
            channels={
                "ch": {"type": "memory", "capacity": 100000, "transactionCapacity": 100000},
                "unused": {"type": "memory"},
            },
            sinks={"k": {"type": "null", "channel": "unused"}},
        )
        agent = Agent.from_properties(properties, "r", {})
        agent.start()
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.stop()


def client(agent: Agent, binary: bool = False) -> FramedClient:
    factory = TCyBinaryProtocolFactory() if binary else TCompactProtocolFactory()
    port = agent.sources["src"].port  # type: ignore[attr-defined]
    return FramedClient(
        "127.0.0.1", port, flume_thrift.ThriftSourceProtocol, protocol_factory=factory, timeout=10
    )


def held(agent: Agent) -> int:
    return agent.channels["ch"].size  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize("binary", [False, True], ids=["compact", "binary"])
@pytest.mark.parametrize(
    ("events", "reason"),
    [
        ([Event()], "required headers and body"),
        ([Event(headers={"a": "b"})], "required body"),
        ([Event(body=b"x")], "required headers"),
        (None, "appendBatch without its events"),
    ],
)
def test_events_without_their_required_fields_are_refused(
    receiver: Callable[..., Agent], binary: bool, events: list[Any] | None, reason: str
) -> None:
    agent = receiver(protocol="binary") if binary else receiver()
    with client(agent, binary) as c:
        with pytest.raises(MalformedFrameError, match=reason):
            c.call("appendBatch", events)
        assert c.call("appendBatch", [Event(headers={}, body=b"")]) == OK  # empty, but present
    assert held(agent) == 1
    metrics = agent.metrics()["SOURCE.src"]
    assert metrics["RequestRefusedCount"] == 1 and metrics["EventReadFail"] == 1
    assert metrics["AppendBatchReceivedCount"] == 1  # the refused one never reached the handler


def test_append_without_its_event_is_refused(receiver: Callable[..., Agent]) -> None:
    agent = receiver()
    with client(agent) as c:
        with pytest.raises(MalformedFrameError, match="append without its event"):
            c.call("append", None)
        assert c.call("append", Event(headers={"h": "1"}, body=b"one")) == OK
    assert held(agent) == 1


def test_the_batch_and_decoded_bytes_limits_are_configurable(receiver: Callable[..., Agent]) -> None:
    agent = receiver(maxBatchEvents=10, maxDecodedBytes=20000)
    with client(agent) as c:
        assert c.call("appendBatch", [Event(headers={}, body=b"e")] * 10) == OK
        with pytest.raises(MalformedFrameError, match="11 events exceeds the maximum of 10"):
            c.call("appendBatch", [Event(headers={}, body=b"e")] * 11)
        with pytest.raises(MalformedFrameError, match="limit of 20000 bytes"):
            c.call("appendBatch", [Event(headers={}, body=b"e" * 5000)] * 5)
        with pytest.raises(MalformedFrameError, match="limit of 20000 bytes"):
            c.call("append", Event(headers={str(i): "v" for i in range(200)}, body=b""))
    assert held(agent) == 10
    assert agent.metrics()["SOURCE.src"]["RequestRefusedCount"] == 3


# -- frames built by hand, to declare what no encoder would ---------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        if not n:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


class Compact:
    LIST, MAP, STRUCT, STRING = 9, 11, 12, 8

    @staticmethod
    def message(api: str) -> bytes:
        return b"\x82\x21" + _varint(1) + _varint(len(api)) + api.encode()

    @staticmethod
    def field(fid: int, ttype: int) -> bytes:
        return bytes([fid << 4 | ttype]) if 0 < fid < 16 else bytes([ttype]) + _varint(fid << 1)

    @staticmethod
    def list(etype: int, count: int) -> bytes:
        return bytes([count << 4 | etype]) if count < 15 else bytes([0xF0 | etype]) + _varint(count)

    @staticmethod
    def map(count: int) -> bytes:
        return _varint(count) + (b"\x88" if count else b"")

    @staticmethod
    def string(size: int) -> bytes:
        return _varint(size)


class Binary:
    LIST, MAP, STRUCT, STRING = 15, 13, 12, 11

    @staticmethod
    def message(api: str) -> bytes:
        return struct.pack("!iI", -2147418111, len(api)) + api.encode() + struct.pack("!i", 1)

    @staticmethod
    def field(fid: int, ttype: int) -> bytes:
        return struct.pack("!bh", ttype, fid)

    @staticmethod
    def list(etype: int, count: int) -> bytes:
        return struct.pack("!bI", etype, count)

    @staticmethod
    def map(count: int) -> bytes:
        return struct.pack("!bbI", 11, 11, count)

    @staticmethod
    def string(size: int) -> bytes:
        return struct.pack("!I", size)


def empty_events(count: int, compact: bool = True) -> bytes:
    """``appendBatch`` declaring ``count`` events, each an empty struct (a stop byte)."""
    p = Compact if compact else Binary
    return p.message("appendBatch") + p.field(1, p.LIST) + p.list(p.STRUCT, count) + b"\x00" * count + b"\x00"


def framed(payload: bytes) -> bytes:
    return struct.pack("!i", len(payload)) + payload


def exchange(port: int, frame: bytes, timeout: float = 10.0) -> bytes:
    """Send one frame; what came back until the server answered or hung up."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(frame)
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)
        except (ConnectionResetError, BrokenPipeError):
            return b""


def test_four_million_empty_events_are_refused_from_their_declared_count(
    receiver: Callable[..., Agent],
) -> None:
    """The frame that drove an agent from 213 MB to 1.14 GB and 33 s of CPU."""
    agent = receiver()
    port = agent.sources["src"].port  # type: ignore[attr-defined]
    frame = framed(empty_events(4_000_000))
    pid = os.getpid()
    rss, cpu, started = vm_rss_kb(pid), cpu_seconds(pid), time.monotonic()
    answer = exchange(port, frame)
    assert b"4000000 events exceeds the maximum of 10000" in answer
    assert time.monotonic() - started < 2 and cpu_seconds(pid) - cpu < 2
    assert vm_rss_kb(pid) - rss < 64 * 1024
    assert held(agent) == 0
    assert agent.metrics()["SOURCE.src"]["RequestRefusedCount"] == 1


# -- the generated attack, on an agent in a process of its own -------------------------------


def attacked_properties(zk: str, compact_port: int, binary_port: int) -> str:
    """Thrift sources of both protocols and an artimon source, each into a drained channel."""
    thrift = {"type": "thrift", "bind": "127.0.0.1", "channels": "ch"}
    poll = {"type": "artimon", "zk": zk, "interval": 1, "agentId": "attacked", "readTimeout": 0.9}
    return agent_properties(
        "a",
        sources={
            "compact": {**thrift, "port": compact_port},
            "binary": {**thrift, "port": binary_port, "protocol": "binary"},
            "poll": {**poll, "channels": "polled"},
        },
        channels={
            "ch": {"type": "memory", "capacity": 100000, "transactionCapacity": 100000},
            "polled": {"type": "memory"},
        },
        sinks={
            "drain": {"type": "null", "channel": "ch", "batchSize": 1000},
            "drain2": {"type": "null", "channel": "polled"},
        },
    )


class Attacked:
    def __init__(self, process: Any, app: AppProcess, ports: dict[str, int], monitor: int) -> None:
        self.process, self.app, self.ports, self.monitor = process, app, ports, monitor

    def metrics(self) -> dict[str, dict[str, float]]:
        return httpx.get(f"http://127.0.0.1:{self.monitor}/metrics", timeout=10).json()  # type: ignore[no-any-return]


@pytest.fixture
def attacked(tmp_path: Path, zk_hosts: str) -> Iterator[Attacked]:
    app = start_app("polled", zk_hosts, variables=100)
    ports = {"compact": free_port(), "binary": free_port()}
    monitor = free_port()
    config = tmp_path / "agent.properties"
    config.write_text(attacked_properties(zk_hosts, ports["compact"], ports["binary"]))
    process = start_agent_process(config, "a", monitor_port=monitor)
    try:
        target = Attacked(process, app, ports, monitor)
        wait_until(lambda: target.metrics()["SOURCE.poll"]["PollSuccessCount"] >= 2, 30, "the agent polling")
        yield target
    finally:
        process.terminate()
        process.wait(30)
        if process.stdout:
            process.stdout.close()
        app.kill()


@st.composite
def hostile_frames(draw: st.DrawFn) -> tuple[str, bytes]:
    """A request whose headers declare counts and sizes from small to 2**31 - 1: the events
    list, one event's headers map or body, or an unknown field's list of lists; followed by
    a few random bytes and up to 4 MB of a repeated pattern (empty structs, field headers)."""
    protocol = draw(st.sampled_from(["compact", "binary"]))
    p: Any = Compact if protocol == "compact" else Binary
    api = draw(st.sampled_from(["appendBatch", "append", "nosuch"]))
    count = draw(st.one_of(st.integers(0, 20), st.integers(10_000, 2**31 - 1)))
    shape = draw(st.sampled_from(["events", "headers", "body", "unknown"]))
    event = p.field(1, p.STRUCT) if api == "append" else p.field(1, p.LIST) + p.list(p.STRUCT, 1)
    parts = [p.message(api)]
    if shape == "events":
        parts += [p.field(1, p.LIST), p.list(p.STRUCT, count)]
    elif shape == "headers":
        parts += [event, p.field(1, p.MAP), p.map(count)]
    elif shape == "body":
        parts += [event, p.field(1, p.MAP), p.map(0), p.field(2, p.STRING), p.string(count)]
    else:
        parts += [p.field(7, p.LIST), p.list(p.LIST, count)]
    parts.append(draw(st.binary(max_size=32)))
    pattern = draw(st.sampled_from([b"\x00", b"\x0c", b"\x00\x00\x00\x00", b"\x19\x1c\x00", b"\x01a"]))
    parts.append(pattern * draw(st.integers(0, 4_000_000 // len(pattern))))
    return protocol, b"".join(parts)


@pytest.mark.slow
def test_generated_frames_with_huge_declared_counts_cost_little_and_the_agent_keeps_serving(
    attacked: Attacked,
) -> None:
    pid = attacked.process.pid
    rss, cpu, before = vm_rss_kb(pid), cpu_seconds(pid), attacked.metrics()
    frames = 0

    @settings(
        max_examples=60,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(request=hostile_frames())
    @example(request=("compact", empty_events(4_000_000)))
    @example(request=("binary", empty_events(4_000_000, compact=False)))
    def attack(request: tuple[str, bytes]) -> None:
        nonlocal frames
        protocol, payload = request
        started = time.monotonic()
        exchange(attacked.ports[protocol], framed(payload))
        frames += 1
        assert time.monotonic() - started < 3
        factory = TCompactProtocolFactory() if protocol == "compact" else TCyBinaryProtocolFactory()
        began = time.monotonic()
        with FramedClient(
            "127.0.0.1",
            attacked.ports[protocol],
            flume_thrift.ThriftSourceProtocol,
            protocol_factory=factory,
            timeout=5,
        ) as good:
            assert good.call("appendBatch", [Event(headers={"ok": "1"}, body=b"fine")]) == OK
        assert time.monotonic() - began < 1  # a well-behaved client is served at once
        assert vm_rss_kb(pid) - rss < 100 * 1024

    started = time.monotonic()
    while time.monotonic() - started < 5:  # long enough for the agent's rounds to be judged
        attack()
    rounds = int(time.monotonic() - started)
    after = attacked.metrics()
    spent = cpu_seconds(pid) - cpu
    assert spent < 0.1 * frames + 5, (spent, frames)
    for counter in ("PollFailCount", "PollTimeoutCount", "RoundOverrunCount"):
        assert after["SOURCE.poll"][counter] == before["SOURCE.poll"][counter], counter
    polled = after["SOURCE.poll"]["PollSuccessCount"] - before["SOURCE.poll"]["PollSuccessCount"]
    assert polled >= rounds - 1, (polled, rounds)
    refused = sum(after[f"SOURCE.{s}"]["RequestRefusedCount"] for s in ("compact", "binary"))
    assert refused >= 2 and after["SOURCE.compact"]["EventReadFail"] >= 1
    assert all("BadFrameCount" in after[f"SOURCE.{s}"] for s in ("compact", "binary"))
    text = httpx.get(f"http://127.0.0.1:{attacked.monitor}/metrics?format=prometheus", timeout=10).text
    assert 'flume_request_refused_count{type="SOURCE",component="compact",agent="a"}' in text
    assert 'flume_bad_frame_count{type="SOURCE",component="binary",agent="a"}' in text


@pytest.mark.parametrize("compact", [True, False], ids=["compact", "binary"])
def test_values_nested_deeper_than_the_limit_are_refused(
    receiver: Callable[..., Agent], compact: bool
) -> None:
    """An unknown field of lists in lists, 100,000 deep: refused, not a recursion error."""
    agent = receiver() if compact else receiver(protocol="binary")
    p: Any = Compact if compact else Binary
    nested = p.list(p.LIST, 1) * 100_000
    payload = p.message("append") + p.field(7, p.LIST) + nested
    answer = exchange(agent.sources["src"].port, framed(payload))  # type: ignore[attr-defined]
    assert b"nested deeper than 16" in answer
    assert agent.metrics()["SOURCE.src"]["RequestRefusedCount"] == 1
