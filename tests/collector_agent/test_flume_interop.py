"""Agent to agent over Avro and Thrift with the real Apache Flume 1.11.0 agent on the other
side, each way counting every event: 0 lost, 0 duplicated, headers and bodies byte-identical
(Avro with ``compression-type = deflate`` one way)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import fastavro
import pytest
from support import unstamped, wait_until

from artimon.servers import FlumeAgent, free_port
from artimon.stack import agent_properties
from collector_agent import Agent, Event

pytestmark = pytest.mark.slow

EVENTS = 100_000
# Per protocol: keys of our source and Flume's sink (Flume -> us), of our sink (us -> Flume).
_TO_US: dict[str, dict[str, object]] = {"avro": {"compression-type": "deflate"}, "thrift": {}}
_OUR_SINK = {"avro": {"batch-size": 1000}, "thrift": {"batchSize": 1000}}
_MEMORY = {"type": "memory", "capacity": 2 * EVENTS, "transactionCapacity": 10_000, "keep-alive": 0}


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


@pytest.mark.parametrize("rpc", ["avro", "thrift"])
def test_flumes_sink_to_our_source(tmp_path: Path, agents: list[Agent | FlumeAgent], rpc: str) -> None:
    source = {"type": rpc, "bind": "127.0.0.1", "port": 0, "channels": "ch", **_TO_US[rpc]}
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
                    **_TO_US[rpc],
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
    assert counts["BadFrameCount"] == counts["RequestRefusedCount"] == 0
    if rpc == "avro":  # Flume's client sent our protocol's MD5
        assert counts["HandshakeMatchBothCount"] >= 1 and counts["HandshakeMatchNoneCount"] == 0


def our_events() -> list[Event]:
    rng = random.Random(30)
    return [
        Event({"n": str(i), "tag": "välue-ß", "empty": ""}, rng.randbytes(1 + i % 200) + b"\n\x00")
        for i in range(EVENTS)
    ]


@pytest.mark.parametrize("rpc", ["avro", "thrift"])
def test_our_sink_to_flumes_source_and_file_roll(
    tmp_path: Path, agents: list[Agent | FlumeAgent], rpc: str
) -> None:
    port, landing = free_port(), tmp_path / "landing"
    landing.mkdir()
    flume = FlumeAgent(
        tmp_path / "flume",
        flume_properties(
            sources={"r": {"type": rpc, "bind": "127.0.0.1", "port": port, "channels": "c"}},
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
    sink = {"type": rpc, "hostname": "127.0.0.1", "port": port, "channel": "c", **_OUR_SINK[rpc]}
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
