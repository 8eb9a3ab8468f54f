"""Apache Flume 1.11.0's agent and ours side by side, with the same configuration: a first
tier (an Avro source into a file channel, an Avro sink) feeding a second (an Avro source into
a memory channel, a null sink), each tier its own process; and the same with Thrift. Prints
a table, writes results/flume_bench.json.

Per case (implementation, RPC, batch size), both tiers start from the same properties text
(Flume's keys, ``batch-size`` for both RPC sinks); Flume's SDK client
(``tests/collector_agent/flume_client/RpcSend.java``, compiled here with ``javac``, the same
driver for both) sends to the first tier, ``--events`` events per body size after a warm-up
of a tenth of them, in batches of the case's size. A run starts when the driver is ready (its
JVM started) and ends when the second tier's null sink has taken every event from its
channel; events/s is over that time, CPU seconds are both tiers' (user + system, from /proc,
the driver's not counted), per million events. Cases are
interleaved: Flume's and ours alternate for each RPC and batch size.

Target (issue 30): our events per CPU second at least Flume's on this file-channel path.

Run: python benchmarks/flume_bench.py [--quick] [--events N] [--rpc avro|thrift ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _report import progress, report

from artimon.servers import FlumeAgent, flume_jars, free_port
from artimon.stack import agent_properties
from artimon.testing import start_agent_process

BATCHES = (100, 1_000)
BODIES = (100, 1024)
RPCS = ("avro", "thrift")
CLIENT = Path(__file__).parents[1] / "tests" / "collector_agent" / "flume_client" / "RpcSend.java"
TICKS = os.sysconf("SC_CLK_TCK")


def tier_properties(name: str, rpc: str, batch: int, port: int, downstream: int | None, data: Path) -> str:
    """One tier: ``rpc`` source on ``port``; a file channel and an ``rpc`` sink to
    ``downstream``, or (``downstream`` None) a memory channel and a null sink."""
    source = {"type": rpc, "bind": "127.0.0.1", "port": port, "channels": "c"}
    if downstream is None:
        channel: dict[str, object] = {"type": "memory", "capacity": 1_000_000, "transactionCapacity": 10_000}
        sink: dict[str, object] = {"type": "null", "channel": "c", "batchSize": batch}
    else:
        channel = {
            "type": "file",
            "checkpointDir": data / "checkpoint",
            "dataDirs": data / "data",
            "capacity": 1_000_000,
            "transactionCapacity": 10_000,
            "minimumRequiredSpace": 1048576,
        }
        sink = {"type": rpc, "hostname": "127.0.0.1", "port": downstream, "channel": "c"}
        sink["batch-size"] = batch
    return agent_properties(name, sources={"r": source}, channels={"c": channel}, sinks={"k": sink})


class Tier:
    """One agent process, Flume's or ours, and its ``/metrics``."""

    def __init__(self, flavour: str, work: Path, properties: str, port: int) -> None:
        self.flavour, self.port = flavour, port
        work.mkdir(parents=True)
        if flavour == "flume":
            self.flume: FlumeAgent | None = FlumeAgent(work, properties, ports=[port], heap="512m")
            self.flume.start()
            self.pid = self.flume.pid
            self.monitor = self.flume.monitoring_port
        else:
            self.flume = None
            config = work / "agent.properties"
            config.write_text(properties)
            self.monitor = free_port()
            self.process = start_agent_process(config, "a1", monitor_port=self.monitor)
            self.pid = self.process.pid

    def drained(self) -> int:
        """Events taken from the channel and committed."""
        url = f"http://127.0.0.1:{self.monitor}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            channel = json.loads(answer.read(1 << 20)).get("CHANNEL.c", {})
        return int(channel.get("EventTakeSuccessCount", 0))  # Flume's null sink counts nothing

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def stop(self) -> None:
        if self.flume is not None:
            self.flume.stop()
        else:
            self.process.terminate()
            self.process.communicate(timeout=60)


def client_properties(rpc: str, port: int, batch: int) -> str:
    kind = "default" if rpc == "avro" else "thrift"
    return f"client.type = {kind}\nhosts = h1\nhosts.h1 = 127.0.0.1:{port}\nbatch-size = {batch}\n"


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def case(
    flavour: str, rpc: str, batch: int, events: int, work: Path, driver: list[str]
) -> list[dict[str, Any]]:
    """Both tiers of one implementation, ``events`` per body size through them."""
    ports = free_port(), free_port()
    second = Tier(flavour, work / "t2", tier_properties("a1", rpc, batch, ports[1], None, work), ports[1])
    first = Tier(flavour, work / "t1", tier_properties("a1", rpc, batch, ports[0], ports[1], work), ports[0])
    client = work / "client.properties"
    client.write_text(client_properties(rpc, ports[0], batch))
    rows, drained = [], 0
    try:
        for body in BODIES:
            for count, measured in ((events // 10, False), (events, True)):
                command = [*driver, str(client), str(count), str(batch), str(body)]
                sender = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
                assert sender.stdout is not None
                if sender.stdout.readline().strip() != "ready":
                    raise RuntimeError("the driver did not start")
                cpu = first.cpu() + second.cpu()
                started = time.perf_counter()
                sender.communicate(timeout=1800)
                if sender.returncode != 0:
                    raise RuntimeError(f"the driver failed ({sender.returncode})")
                drained += count
                wait_for(lambda total=drained: second.drained() >= total, 1800, f"{drained} events drained")
                elapsed = time.perf_counter() - started
                used = first.cpu() + second.cpu() - cpu
                if measured:
                    rows.append(row(flavour, rpc, batch, body, count, elapsed, used))
                    progress(f"{flavour} {rpc} batch {batch} body {body}: {count / elapsed:,.0f} events/s")
    finally:
        first.stop()
        second.stop()
    return rows


def row(
    flavour: str, rpc: str, batch: int, body: int, events: int, elapsed: float, cpu: float
) -> dict[str, Any]:
    return {
        "agent": flavour,
        "rpc": rpc,
        "batch": batch,
        "body": body,
        "events": events,
        "events/s": events / elapsed,
        "CPU s/M events": cpu / events * 1e6,
        "events/CPU s": events / cpu if cpu else float("inf"),
    }


def compile_driver(work: Path) -> list[str]:
    classes = work / "classes"
    classes.mkdir()
    classpath = os.pathsep.join(str(jar) for jar in flume_jars())
    subprocess.run(["javac", "-d", str(classes), "-cp", classpath, str(CLIENT)], check=True, timeout=300)
    return ["java", "-Xmx512m", "-cp", f"{classes}{os.pathsep}{classpath}", "RpcSend"]


def ratios(rows: list[dict[str, Any]]) -> None:
    """Ours over Flume's, events per CPU second, on each case."""
    flume = {(r["rpc"], r["batch"], r["body"]): r for r in rows if r["agent"] == "flume"}
    for r in rows:
        theirs = flume.get((r["rpc"], r["batch"], r["body"]))
        if r["agent"] == "ours" and theirs:
            r["ours/Flume per CPU s"] = r["events/CPU s"] / theirs["events/CPU s"]
            r["target met"] = "yes" if r["ours/Flume per CPU s"] >= 1 else "NO"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="10,000 events a case")
    parser.add_argument("--events", type=int, default=100_000, help="per case and body size")
    parser.add_argument("--rpc", choices=RPCS, action="append", help="only this RPC (repeatable)")
    options = parser.parse_args()
    events = 10_000 if options.quick else options.events
    progress(f"load average before: {os.getloadavg()}")
    rows: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="flume-bench-"))
    try:
        driver = compile_driver(work)
        for rpc in options.rpc or RPCS:
            for batch in BATCHES:
                for flavour in ("flume", "ours"):
                    rows += case(flavour, rpc, batch, events, work / f"{flavour}-{rpc}-{batch}", driver)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratios(rows)
    columns = ["agent", "rpc", "batch", "body", "events", "events/s", "CPU s/M events", "events/CPU s"]
    report("flume_bench", rows, [*columns, "ours/Flume per CPU s", "target met"])
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
