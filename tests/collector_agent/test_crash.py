"""kill -9 an agent with a file channel mid-flow, five times: every event its source
acknowledged is delivered downstream, none is lost."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from flume_gen import ThriftSourceProtocol
from flume_gen.ttypes import Status, ThriftFlumeEvent
from thrift.protocol import TCompactProtocol
from thrift.transport import TSocket, TTransport

from artimon.servers import free_port
from artimon.stack import agent_properties
from artimon.testing import start_agent_process
from collector_agent import Agent


def middle_properties(port: int, data: Path, downstream: int) -> str:
    """A Thrift source on ``port`` into a file channel in ``data``, forwarded to ``downstream``."""
    channel = {"type": "file", "dataDirs": data, "minimumRequiredSpace": 1048576, "transactionCapacity": 1000}
    forward = {
        "type": "thrift",
        "channel": "fc",
        "hostname": "127.0.0.1",
        "port": downstream,
        "batchSize": 50,
        "maxBackoffSleep": 100,
    }
    return agent_properties(
        "m",
        sources={"in": {"type": "thrift", "bind": "127.0.0.1", "port": port, "channels": "fc"}},
        channels={"fc": channel},
        sinks={"out": forward},
    )


DOWNSTREAM = agent_properties(  # what it receives stays in its channel, to be counted
    "d",
    sources={"in": {"type": "thrift", "bind": "127.0.0.1", "port": 0, "channels": "ch"}},
    channels={
        "ch": {"type": "memory", "capacity": 1000000, "transactionCapacity": 1000},
        "idle": {"type": "memory"},
    },
    sinks={"none": {"type": "null", "channel": "idle"}},
)


def start_middle(config: Path) -> subprocess.Popen[str]:
    return start_agent_process(config, "m")


class Sender:
    """A Flume client sending numbered batches; remembers what was acknowledged OK."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.acknowledged: set[int] = set()
        self.next_id = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        client = transport = None
        while not self.stop.is_set():
            try:
                if transport is None:
                    transport = TTransport.TFramedTransport(TSocket.TSocket("127.0.0.1", self.port))
                    transport.open()
                    client = ThriftSourceProtocol.Client(TCompactProtocol.TCompactProtocol(transport))
                ids = list(range(self.next_id, self.next_id + 20))
                self.next_id += 20
                status = client.appendBatch([ThriftFlumeEvent({"id": str(i)}, str(i).encode()) for i in ids])  # type: ignore[union-attr]
                if status == Status.OK:
                    self.acknowledged.update(ids)
            except Exception:  # the middle agent is being killed: reconnect
                if transport is not None:
                    transport.close()
                transport = None
                self.stop.wait(0.05)
        if transport is not None:
            transport.close()


@pytest.mark.slow
def test_sigkill_mid_flow_five_times_loses_no_acknowledged_event(
    tmp_path: Path, wait: Callable[..., None]
) -> None:
    downstream = Agent.from_properties(DOWNSTREAM, "d", {})
    downstream.start()
    port = free_port()
    config = tmp_path / "middle.properties"
    config.write_text(middle_properties(port, tmp_path / "fc", downstream.sources["in"].port))
    sender = Sender(port)
    middle = start_middle(config)
    sender.thread.start()
    try:
        for _ in range(5):
            acknowledged = len(sender.acknowledged)
            wait(lambda a=acknowledged: len(sender.acknowledged) > a + 200, timeout=60, what="traffic")
            os.kill(middle.pid, signal.SIGKILL)
            middle.wait()
            middle.stdout.close()  # type: ignore[union-attr]
            middle = start_middle(config)
        wait(lambda: len(sender.acknowledged) > 0, what="traffic")
        sender.stop.set()
        sender.thread.join(30)
        expected = set(sender.acknowledged)

        received: set[int] = set()

        def delivered() -> set[int]:
            while True:
                with downstream.channels["ch"].transaction() as tx:
                    events = tx.take_batch(1000)
                received.update(int(e.body) for e in events)
                if not events:
                    return received

        wait(lambda: expected <= delivered(), timeout=120, what="every acknowledged event downstream")
        assert len(expected) > 1000
        replays = re.findall(r"replayed (\d+) events", config.with_suffix(".log").read_text())
        assert len(replays) == 6
        assert any(int(n) > 0 for n in replays[1:]), f"no kill left events in the channel: {replays}"
    finally:
        sender.stop.set()
        if middle.poll() is None:
            middle.send_signal(signal.SIGTERM)
            middle.wait(30)
        if middle.stdout:
            middle.stdout.close()
        downstream.stop()
