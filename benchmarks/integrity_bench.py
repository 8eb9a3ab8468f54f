"""The cost of the integrity stamp on the agent's hot path: a source's batch through its
channel processor into a channel, then taken out by a sink's transaction, with the stamp on
(the processor stamps each event: ``collector_agent/integrity.py``; a source receiving
stamped events checks them at the same cost) and off, side by side in one run (cases
interleaved, the best of ``--repeat`` runs each), for the memory and the file channel,
batches of 100 and 1,000 events of 100 B, 1 KiB and 16 KiB bodies with an Artimon event's
headers. Then the Parquet writer's side: ``spark_jobs/integrity.py``'s check of landing
records against ``explode.py``'s explode of the same Arrow batch (what ``raw_ingest`` runs
next in Python; without Spark: the two functions on one batch, the best of ``--repeat``),
for records of 100 and 1,500 samples. Prints a table with the on/off ratio of events per
second, and the load average; writes results/integrity_bench.json.

Run: python benchmarks/integrity_bench.py [--quick] [--events N] [--repeat R]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
from _report import report

from bookkeeper import Bookkeeper
from bookkeeper.ground import LANDING_SCHEMA, encode_checksum, encode_identity, encode_sample_batch
from collector_agent.channel_processor import ChannelProcessor
from collector_agent.channels.base import BasicChannel
from collector_agent.channels.file.channel import FileChannel
from collector_agent.channels.memory import MemoryChannel
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.integrity import SetAside, event_checksum
from collector_agent.selectors.replicating import ReplicatingChannelSelector

BATCHES = (100, 1_000)
RECORD_SAMPLES = (100, 1_500)
LANDING_RECORDS = 200
BODIES = (100, 1024, 16 * 1024)


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


def _landing_batch(samples: int) -> pa.RecordBatch:
    """``LANDING_RECORDS`` stamped landing records as Spark hands them to Python, with a
    ``keep`` column (what explode reads)."""
    parsed = fastavro.parse_schema(LANDING_SCHEMA)
    records = []
    for n in range(LANDING_RECORDS):
        bk = Bookkeeper(f"app{n % 7}", labels={"module": f"m{n}"}, environ={})
        for i in range(samples):
            bk.integer("requests", path=f"/p{i % 50}", code=str(i // 50)).set(i)
        body = encode_sample_batch(bk.snapshot())
        headers = {
            "artimon.round": "1700000040000",
            "artimon.endpoint": f"10.0.0.{n}:1:u",
            "artimon.agent": "a",
        }
        identity = encode_identity(1_700_000_040_000, headers["artimon.endpoint"], "a")
        encoded = body + identity + encode_checksum(event_checksum(body, headers))
        records.append(fastavro.schemaless_reader(io.BytesIO(encoded), parsed, None))
    table = pa.Table.from_pylist(
        [
            {**r, "common_labels": list(r["common_labels"].items()), "file": "x", "keep": None}
            for r in records
        ],
        schema=pa.schema(
            [
                ("context", pa.string()),
                ("snapshot_ms", pa.int64()),
                ("common_labels", pa.map_(pa.string(), pa.string())),
                ("names", pa.list_(pa.string())),
                ("label_sets", pa.list_(pa.string())),
                *(
                    (name, pa.binary())
                    for name in ("name_ids", "label_set_ids", "types", "values", "timestamps")
                ),
                ("strings", pa.list_(pa.string())),
                ("round_ms", pa.int64()),
                ("endpoint", pa.string()),
                ("agent", pa.string()),
                ("checksum", pa.int64()),
                ("file", pa.string()),
                ("keep", pa.binary()),
            ]
        ),
    )
    return table.combine_chunks().to_batches()[0]


def spark_case(samples: int, repeat: int) -> dict[str, Any]:
    """Seconds per record of the landing check and of the explode, on one batch."""
    from spark_jobs.explode import explode_batches
    from spark_jobs.integrity import check_landed

    batch = _landing_batch(samples)
    best = {"check": float("inf"), "explode": float("inf")}
    for _ in range(repeat):
        for name, step in (("check", check_landed), ("explode", explode_batches)):
            start = time.perf_counter()
            out = list(step(iter([batch])))
            best[name] = min(best[name], time.perf_counter() - start)
            if name == "check":
                assert out[0].column("damage").null_count == LANDING_RECORDS
    return {
        "samples_per_record": samples,
        "check_us_per_record": round(best["check"] / LANDING_RECORDS * 1e6, 1),
        "explode_us_per_record": round(best["explode"] / LANDING_RECORDS * 1e6, 1),
        "check_over_explode": round(best["check"] / best["explode"], 3),
    }


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
    spark_rows = [spark_case(samples, args.repeat) for samples in RECORD_SAMPLES]
    load_after = os.getloadavg()
    report("integrity_bench", rows, list(rows[0]))
    report("integrity_bench_landing", spark_rows, list(spark_rows[0]))
    print(f"load average before {load_before}, after {load_after}")


if __name__ == "__main__":
    main()
