"""Integrity end to end: bytes altered at each hop in turn (a file channel's frame, a Thrift
frame on the wire through a relay, a Kafka record, a landing file) are set aside and counted
where they are met, never stored in VHMS or in the Parquet history; the unaltered events are
stored exactly once in both.

Agent A: ``artimon_file`` (stamps each module's batch) -> file channel -> ``thrift`` sink ->
a relay that flips a byte of one body -> agent B: ``thrift`` source -> ``kafka`` sink -> the
topic (where the test also produces a record of its own, altered after it was stamped) ->
``kafka`` source -> ``vhms`` sink and ``raw`` sink -> the landing file -> ``raw_ingest``."""

from __future__ import annotations

import json
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from kafka_helpers import produce_events

from artimon.servers import KafkaCluster, free_port
from artimon.stack import agent_properties
from bookkeeper import Bookkeeper
from bookkeeper.export import write_snapshot_file
from bookkeeper.ground import encode_sample_batch
from collector_agent import STAMP_HEADER, Agent, Event, event_checksum
from vhms.server import Store, VhmsService

pytestmark = [pytest.mark.slow, pytest.mark.spark]

MINUTE = 1_700_000_040_000
VARIABLES = 5
THROUGH_A = {
    "ok-a": None,
    "ok-b": None,
    "ok-c": None,
    "frame-x": b"frame",
    "wire-x": b"wire",
    "land-x": b"land",
}


def bookkeeper(module: str, tamper: bytes | None) -> Bookkeeper:
    """``VARIABLES`` counters of ``module``, and a variable whose name the test alters."""
    bk = Bookkeeper(module, labels={"module": module}, environ={})
    for i in range(VARIABLES):
        bk.integer("requests", path=f"/p{i}").set(i)
    if tamper is not None:
        bk.integer("tamper_" + tamper.decode()).set(1)
    for var in bk._vars.values():
        var._ts = MINUTE / 1000
    return bk


def flip(data: bytearray, marker: bytes) -> None:
    """Change the last letter of ``marker``'s one occurrence in ``data`` to upper case."""
    assert data.count(marker) == 1, f"{marker!r} found {data.count(marker)} times"
    data[data.find(marker) + len(marker) - 1] ^= 0x20


class FlippingRelay:
    """A TCP relay to ``target`` that flips ``marker``'s last letter in what the client sends."""

    def __init__(self, port: int, target: int, marker: bytes) -> None:
        self.target, self.marker, self.flipped = target, marker, 0
        self.listener = socket.create_server(("127.0.0.1", port))
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target), timeout=30)
            self.sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, upstream: bool) -> None:
        carry = b""  # the end of what was sent: a marker may straddle two reads
        try:
            while data := source.recv(65536):
                window = carry + data
                found = window.find(self.marker)
                if upstream and found >= 0 and not self.flipped:
                    chunk = bytearray(data)
                    chunk[found + len(self.marker) - 1 - len(carry)] ^= 0x20
                    data, self.flipped = bytes(chunk), 1
                sink.sendall(data)
                carry = window[-(len(self.marker) - 1) :]
        except OSError:
            pass
        finally:
            sink.close()

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


def agent_a(drop: Path, data: Path, dead: Path, relay_port: int) -> Agent:
    files = {
        "type": "artimon_file",
        "directory": drop,
        "interval": 0.1,
        "maxBackoffSleep": 50,
        "channels": "fc",
    }
    channel = {"type": "file", "dataDirs": data, "deadLetter.dir": dead, "minimumRequiredSpace": 0}
    out = {
        "type": "thrift",
        "hostname": "127.0.0.1",
        "port": relay_port,
        "channel": "fc",
        "maxBackoffSleep": 100,
    }
    properties = agent_properties("a", sources={"files": files}, channels={"fc": channel}, sinks={"out": out})
    agent = Agent.from_properties(properties, "a", {})
    agent.start()
    return agent


def agent_b(kafka: KafkaCluster, topic: str, vhms_port: int, landing: Path, dead: Path) -> Agent:
    memory = {"type": "memory", "capacity": 1000}
    bootstrap = kafka.bootstrap_servers
    properties = agent_properties(
        "b",
        sources={
            "in": {"type": "thrift", "bind": "127.0.0.1", "port": 0, "channels": "m", "deadLetter.dir": dead},
            "kin": {
                "type": "kafka",
                "kafka.bootstrap.servers": bootstrap,
                "kafka.topics": topic,
                "batchDurationMillis": 200,
                "batchSize": 100,
                "deadLetter.dir": dead,
                "channels": "v land",
            },
        },
        channels={"m": memory, "v": memory, "land": memory},
        sinks={
            "ks": {
                "type": "kafka",
                "kafka.bootstrap.servers": bootstrap,
                "kafka.topic": topic,
                "channel": "m",
            },
            "vh": {
                "type": "vhms",
                "channel": "v",
                "servers": f"default@127.0.0.1:{vhms_port}",
                "time": "sample",
                "timeout": 10,
                "maxBackoffSleep": 100,
            },
            "raw": {
                "type": "raw",
                "channel": "land",
                "directory": landing,
                "rollInterval": 0.5,
                "codec": "null",
            },
        },
    )
    agent = Agent.from_properties(properties, "b", {})
    agent.start()
    return agent


def from_kafka(module: str, tamper: bytes | None) -> Event:
    """A stamped event as another agent would have produced it into the topic."""
    body = encode_sample_batch(bookkeeper(module, tamper).snapshot())
    headers = {"artimon.context": module, "artimon.endpoint": module, "artimon.round": str(MINUTE)}
    headers[STAMP_HEADER] = f"{event_checksum(body, headers):08x}"
    if tamper is not None:
        altered = bytearray(body)
        flip(altered, b"tamper_" + tamper)
        body = bytes(altered)
    return Event(headers, body)


def dead_letters(directory: Path, name: str) -> list[dict[str, Any]]:
    path = directory / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def started() -> Iterator[list[Any]]:
    running: list[Any] = []
    yield running
    for thing in reversed(running):
        (thing.close if isinstance(thing, FlippingRelay) else thing.stop)()


def test_bytes_altered_at_each_hop_are_set_aside_counted_and_never_stored(
    tmp_path: Path, kafka: KafkaCluster, topic: str, spark: Any, wait: Callable[..., None], started: list[Any]
) -> None:
    drop, data, dead, landing = tmp_path / "drop", tmp_path / "fc", tmp_path / "dead", tmp_path / "landing"
    drop.mkdir()
    for module, tamper in THROUGH_A.items():
        write_snapshot_file(bookkeeper(module, tamper), drop / f"{module}.artimon")
    relay_port = free_port()

    # 1. a frame of the file channel: stamped by the source, altered at rest
    first = agent_a(drop, data, dead, relay_port)
    started.append(first)
    wait(
        lambda: first.channels["fc"].metrics()["ChannelSize"] == len(THROUGH_A), timeout=60, what="fc filled"
    )
    first.stop()
    started.remove(first)
    for path in drop.iterdir():
        path.unlink()
    image = bytearray((data / "channel.db").read_bytes())
    flip(image, b"tamper_frame")
    (data / "channel.db").write_bytes(bytes(image))

    store = Store("60s:60")
    vhms = VhmsService(store, http_port=None, snapshot_dir=None, wal=False)
    vhms.start(register=False)
    started.append(vhms)
    b = agent_b(kafka, topic, vhms.port, landing, dead)
    started.append(b)
    # 2. a Thrift frame on the wire
    relay = FlippingRelay(relay_port, b.sources["in"].port, b"tamper_wire")  # type: ignore[attr-defined]
    started.append(relay)
    a = agent_a(drop, data, dead, relay_port)
    started.append(a)
    # 3. a Kafka record: one altered after its stamp, one intact
    produce_events(
        kafka.bootstrap_servers, topic, [from_kafka("kafka-x", b"kafka"), from_kafka("kafka-ok", None)]
    )

    stored = ["ok-a", "ok-b", "ok-c", "land-x", "kafka-ok"]
    sinks = b.sinks

    def delivered() -> bool:
        raw = sinks["raw"].metrics()
        done = all(sinks[s].metrics()["EventDrainSuccessCount"] == len(stored) for s in ("vh", "raw"))
        return done and raw["FilesRolledCount"] >= 1 and not list(landing.glob("*.tmp"))

    wait(delivered, timeout=120, what="every intact event in VHMS and in a rolled landing file")
    assert relay.flipped == 1
    assert a.channels["fc"].metrics()["ChecksumMismatchCount"] == 1
    assert a.channels["fc"].metrics()["ChannelSize"] == 0
    assert b.sources["in"].metrics()["ChecksumMismatchCount"] == 1
    assert b.sources["kin"].metrics()["ChecksumMismatchCount"] == 1
    for name in ("m", "v", "land"):
        assert b.channels[name].metrics()["ChecksumMismatchCount"] == 0
    aside = {
        name: dead_letters(dead, file) for name, file in (("fc", "channel-fc"), ("in", "in"), ("kin", "kin"))
    }
    assert [len(records) for records in aside.values()] == [1, 1, 1]
    assert all(r["reason"] == "checksum mismatch" for records in aside.values() for r in records)
    assert aside["in"][0]["headers"]["artimon.context"] == "wire-x"
    assert aside["kin"][0]["headers"]["artimon.context"] == "kafka-x"

    # 4. a landing file
    (landed,) = [path for path in landing.glob("*.avro") if b"tamper_land" in path.read_bytes()]
    contents = bytearray(landed.read_bytes())
    flip(contents, b"tamper_land")
    landed.write_bytes(bytes(contents))

    in_vhms = Counter(
        key.partition("module=")[2].partition(",")[0].rstrip("}")
        for key in store.fetch("requests", MINUTE - 60_000, MINUTE + 60_000, resolution=60).keys
    )
    assert in_vhms == dict.fromkeys(stored, VARIABLES)  # the landing file was altered after VHMS had it
    refused = spark_ingest(spark, landing, tmp_path)
    assert refused == 1
    rows = pq.read_table(tmp_path / "parquet", columns=["context"]).to_pylist()
    assert Counter(row["context"] for row in rows) == dict.fromkeys(
        ["ok-a", "ok-b", "ok-c", "kafka-ok"], VARIABLES
    )


def spark_ingest(spark: Any, landing: Path, scratch: Path) -> int:
    from spark_jobs import raw_ingest  # pyspark's import is slow: only here

    return raw_ingest.ingest_once(
        spark, landing.as_uri(), (scratch / "parquet").as_uri(), (scratch / "ck").as_uri()
    )
