"""The cost of the integrity stamp on the agent's hot path: a source's batch through its
channel processor into a channel, then taken out by a sink's transaction, with the checks on
(the processor stamps, the take checks: ``collector_agent/integrity.py``) and off, side by
side in one run (cases interleaved, the best of ``--repeat`` runs each), for the memory and
the file channel, batches of 100 and 1,000 events of 100 B, 1 KiB and 16 KiB bodies with an
Artimon event's headers. Prints a table with the on/off ratio of events per second, and the
load average; writes results/integrity_bench.json.

Run: python benchmarks/integrity_bench.py [--quick] [--events N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from _report import report

from collector_agent.channel_processor import ChannelProcessor
from collector_agent.channels.base import BasicChannel
from collector_agent.channels.file.channel import FileChannel
from collector_agent.channels.memory import MemoryChannel
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.integrity import SetAside
from collector_agent.selectors.replicating import ReplicatingChannelSelector

BATCHES = (100, 1_000)
BODIES = (100, 1024, 16 * 1024)


class _Unchecked:
    """What the checks-off case puts in place of a channel's :class:`SetAside`."""

    def keep(self, events: list[Event]) -> list[Event]:
        return events


def _events(count: int, body_size: int) -> list[Event]:
    """Fresh events (a stamp is written into the headers): endpoints of one round."""
    body = os.urandom(body_size)
    return [
        Event(
            {
                "artimon.context": "app",
                "artimon.endpoint": f"10.0.{n // 250 % 250}.{n % 250}:9000:uuid",
                "artimon.round": "1700000040000",
                "artimon.agent": "agent-01",
            },
            body,
        )
        for n in range(count)
    ]


def _channel(kind: str, directory: Path, capacity: int, batch: int) -> BasicChannel:
    keys = {"capacity": str(capacity), "transactionCapacity": str(batch), "deadLetter.dir": str(directory)}
    channel: BasicChannel
    if kind == "memory":
        channel = MemoryChannel("c")
        keys["byteCapacity"] = "0"
    else:
        channel = FileChannel("c")
        keys.update({"dataDirs": str(directory / "fc"), "minimumRequiredSpace": "0"})
    channel.configure(Context(keys))
    channel.start()
    return channel


def run_case(kind: str, checks: bool, events: int, batch: int, body: int, scratch: Path) -> float:
    """Events per second through put and take, the checks on or off."""
    directory = Path(tempfile.mkdtemp(dir=scratch))
    channel = _channel(kind, directory, events, batch)
    selector = ReplicatingChannelSelector()
    selector.configure(Context(), {"c": channel})
    integrity = SetAside(channel.counters, "source", directory) if checks else None
    processor = ChannelProcessor(selector, (), integrity)
    if not checks:
        channel.integrity = _Unchecked()  # type: ignore[assignment]
    batches = [_events(batch, body) for _ in range(events // batch)]
    try:
        start = time.perf_counter()
        for one in batches:
            processor.process_batch(one)
        taken = 0
        while taken < events:
            with channel.transaction() as tx:
                taken += len(tx.take_batch(batch))
        elapsed = time.perf_counter() - start
    finally:
        channel.stop()
        shutil.rmtree(directory, ignore_errors=True)
    assert channel.metrics()["ChecksumMismatchCount"] == 0
    return events / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer events (a smoke run)")
    parser.add_argument("--events", type=int, default=100_000, help="events per memory case (file: a fifth)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    events = 10_000 if args.quick else args.events
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    scratch = Path(tempfile.mkdtemp(prefix="integrity-bench-"))
    try:
        for kind in ("memory", "file"):
            count = events if kind == "memory" else max(events // 5, 2_000)
            for batch in BATCHES:
                for body in BODIES:
                    best = {True: 0.0, False: 0.0}
                    for _ in range(args.repeat):
                        for checks in (False, True):
                            rate = run_case(kind, checks, count, batch, body, scratch)
                            best[checks] = max(best[checks], rate)
                    rows.append(
                        {
                            "channel": kind,
                            "batch": batch,
                            "body": body,
                            "off_events_per_s": round(best[False]),
                            "on_events_per_s": round(best[True]),
                            "on_over_off": round(best[True] / best[False], 3),
                        }
                    )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = os.getloadavg()
    report("integrity_bench", rows, list(rows[0]))
    print(f"load average before {load_before}, after {load_after}")


if __name__ == "__main__":
    main()
