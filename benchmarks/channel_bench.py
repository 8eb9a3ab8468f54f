"""Collector agent channels: put+commit and take+commit throughput of the memory and file
channels, the file channel against a plain fsync'd append loop on the same disk, and the
file channel's replay of a million events. Prints a table, writes results/channel_bench.json.

Targets: memory channel at least 300K events/s with batches of 1,000; file channel at least
50% of the bandwidth of a plain fsync'd append loop (same batches and bodies, same disk);
replay (``start()`` of a new channel) of 1M events in under 10 s.

The tight-disk case puts and takes 16 MiB (batches of 100 events of 1 KiB) through a file
channel whose disk counts as tight (``minimumRequiredSpace`` set 70 MiB under the free
space: its log's file is kept to 1 MiB, ``checkpoint.py``) and through an ordinary one, side
by side, and reports the ratio of the two (target: at least 0.8).

Each put case puts one batch per transaction until about ``--seconds`` have passed; its take
case then takes those events back, one batch per transaction, until the channel is empty.
The ceiling appends each batch's bodies to a plain file and fsyncs it, for as long, once
before and once after the file channel's case; the better run is the one compared with.
MB/s counts body bytes (as byte capacities do), 1 MB = 10^6 bytes; the memory channel
passes references, so its MB/s is nominal (events/s times the body size). The file channel
and the ceiling write to a temporary directory under ``--dir`` (default: the system temp
dir, /tmp), removed at the end; point ``--dir`` at the disk to measure.

Run: python benchmarks/channel_bench.py [--quick] [--dir DIR] [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _report import progress, report

from collector_agent.channels.base import BasicChannel
from collector_agent.channels.file.channel import FileChannel
from collector_agent.channels.memory import MemoryChannel
from collector_agent.context import Context
from collector_agent.event import Event

BATCHES = (100, 1_000)
BODIES = (1024, 16 * 1024)
MEMORY_MAX_EVENTS = 20_000_000  # the memory channel holds references to one reused batch
FILE_MAX_BYTES = 2 * 1024**3  # body bytes one file channel case may write at most
REPLAY_BODY, REPLAY_BATCH = 100, 10_000
MEMORY_TARGET = 300_000  # events/s, batches of 1,000
FSYNC_RATIO_TARGET = 0.5
REPLAY_TARGET_PER_MILLION = 10.0  # seconds
TIGHT_BYTES_PUT = 16 * 1024 * 1024  # body bytes of the tight-disk case
TIGHT_HEADROOM = 70 * 1024 * 1024  # free space above minimumRequiredSpace there: tight under 80 MiB
TIGHT_RATIO_TARGET = 0.8

HEADERS = {"host": "bench-01.example.com", "timestamp": "1700000000000", "type": "metrics"}


def make_batch(count: int, body_size: int) -> list[Event]:
    """``count`` events with distinct random bodies (built once, put again and again)."""
    return [Event(dict(HEADERS), os.urandom(body_size)) for _ in range(count)]


def memory_channel(batch: int) -> MemoryChannel:
    channel = MemoryChannel("bench-memory")
    channel.configure(
        Context(
            {
                "capacity": str(MEMORY_MAX_EVENTS),
                "transactionCapacity": str(batch),
                "byteCapacity": "0",  # no byte limit: the bodies are shared, not held
            }
        )
    )
    channel.start()
    return channel


def file_channel(directory: Path, batch: int, capacity: int, minimum_space: int = 1048576) -> FileChannel:
    channel = FileChannel("bench-file")
    channel.configure(
        Context(
            {
                "dataDirs": str(directory),
                "capacity": str(capacity),
                "transactionCapacity": str(batch),
                "minimumRequiredSpace": str(minimum_space),
            }
        )
    )
    channel.start()
    return channel


def put_loop(
    channel: BasicChannel, events: list[Event], seconds: float, max_events: int
) -> tuple[int, float]:
    """Put ``events`` once per transaction for about ``seconds``: (events put, elapsed)."""
    count = 0
    started = time.perf_counter()
    deadline = started + seconds
    while True:
        tx = channel.transaction()
        tx.begin()
        tx.put_batch(events)
        tx.commit()
        tx.close()
        count += len(events)
        now = time.perf_counter()
        if now >= deadline or count + len(events) > max_events:
            return count, now - started


def take_loop(channel: BasicChannel, batch: int, expected: int) -> float:
    """Take ``expected`` events, ``batch`` per transaction: elapsed seconds."""
    count = 0
    started = time.perf_counter()
    while count < expected:
        tx = channel.transaction()
        tx.begin()
        taken = tx.take_batch(batch)
        tx.commit()
        tx.close()
        if not taken:
            raise AssertionError(f"channel empty after {count} of {expected} events")
        count += len(taken)
    elapsed = time.perf_counter() - started
    if count != expected or channel.size != 0:
        raise AssertionError(f"took {count} of {expected} events, {channel.size} left")
    return elapsed


def warm_up(channel: BasicChannel, events: list[Event]) -> None:
    """One put and one take (first statements, first pages) before the clock starts."""
    with channel.transaction() as tx:
        tx.put_batch(events)
    with channel.transaction() as tx:
        tx.take_batch(len(events))


def fsync_append(path: Path, events: list[Event], seconds: float, max_bytes: int) -> tuple[int, float]:
    """The ceiling: append each batch's bodies to a file and fsync, for about ``seconds``:
    (batches written, elapsed)."""
    data = b"".join(e.body for e in events)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)  # warm up: create the file's first extent
        os.fsync(fd)
        count = 0
        started = time.perf_counter()
        deadline = started + seconds
        while True:
            os.write(fd, data)
            os.fsync(fd)
            count += 1
            now = time.perf_counter()
            if now >= deadline or (count + 1) * len(data) > max_bytes:
                return count, now - started
    finally:
        os.close(fd)
        path.unlink()


def kb(size: int) -> str:
    return f"{size // 1024} KB" if size >= 1024 else f"{size} B"


def row(case: str, batch: int, body: int, events: int, seconds: float, **extra: Any) -> dict[str, Any]:
    return {
        "case": case,
        "batch": batch,
        "body": kb(body),
        "events": events,
        "seconds": seconds,
        "events/s": events / seconds,
        "MB/s": events * body / seconds / 1e6,
        **extra,
    }


def verdict(ok: bool) -> str:
    return "yes" if ok else "NO"


def tight_disk(work: Path, seconds: float, done: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """Put and take through an ordinary file channel and one on a tight disk, side by side."""
    batch, body = 100, 1024
    events = make_batch(batch, body)
    max_events = TIGHT_BYTES_PUT // body
    rows: list[dict[str, Any]] = []
    for case in ("file", "file, tight disk"):
        directory = work / case.replace(", ", "-").replace(" ", "-")
        directory.mkdir()
        minimum = 1048576
        if "tight" in case:
            minimum = max(minimum, shutil.disk_usage(directory).free - TIGHT_HEADROOM)
        channel = file_channel(directory, batch, max_events + batch, minimum)
        warm_up(channel, events)
        if "tight" in case and not channel.space.tight():
            raise AssertionError("the tight-disk channel does not count its disk as tight")
        count, put_s = put_loop(channel, events, seconds, max_events)
        take_s = take_loop(channel, batch, count)
        channel.stop()
        shutil.rmtree(directory)
        for action, elapsed in (("put+commit", put_s), ("take+commit", take_s)):
            entry = row(f"{case} {action} (16 MiB)", batch, body, count, elapsed)
            done(entry)
            rows.append(entry)
    for ordinary, tight in zip(rows[:2], rows[2:], strict=True):
        tight["ratio"] = tight["events/s"] / ordinary["events/s"]
        tight["target"] = f"ratio >= {TIGHT_RATIO_TARGET}"
        tight["met"] = verdict(tight["ratio"] >= TIGHT_RATIO_TARGET)
    return rows


def replay(directory: Path, total: int, done: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """Fill a file channel with ``total`` small events, stop it, and time ``start()`` of a
    new channel on the same directory (which replays them)."""
    capacity = str(max(total, 1_000_000))
    events = make_batch(REPLAY_BATCH, REPLAY_BODY)
    channel = file_channel(directory, REPLAY_BATCH, int(capacity))
    count, fill_s = put_loop(channel, events, float("inf"), total)
    channel.stop()
    if count != total:
        raise AssertionError(f"filled {count} of {total} events")
    fill = row("file fill for replay (put+commit)", REPLAY_BATCH, REPLAY_BODY, count, fill_s)
    done(fill)

    channel = FileChannel("bench-file")
    channel.configure(
        Context(
            {
                "dataDirs": str(directory),
                "capacity": capacity,
                "transactionCapacity": str(REPLAY_BATCH),
                "minimumRequiredSpace": "1048576",
            }
        )
    )
    started = time.perf_counter()
    channel.start()
    replay_s = time.perf_counter() - started
    size = channel.size
    channel.stop()
    if size != total:
        raise AssertionError(f"replayed {size} events, expected {total}")
    limit = REPLAY_TARGET_PER_MILLION * total / 1_000_000
    entry = row("file replay: start() of a new channel", REPLAY_BATCH, REPLAY_BODY, size, replay_s)
    del entry["MB/s"]  # replay reads the row ids, not the bodies
    entry["target"] = f"< {limit:g} s"
    entry["met"] = verdict(replay_s < limit)
    done(entry)
    return [fill, entry]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="short cases, 100K-event replay (smoke run)")
    parser.add_argument("--dir", type=Path, default=None, help="where the file channel writes (a disk)")
    parser.add_argument("--seconds", type=float, default=None, help="duration of each put case")
    args = parser.parse_args()
    seconds = args.seconds or (0.15 if args.quick else 1.5)
    replay_events = 100_000 if args.quick else 1_000_000

    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="channel_bench_", dir=args.dir))
    cases = [(batch, body) for batch in BATCHES for body in BODIES]
    total = len(cases) * 6 + 2 + 4
    step = 0

    def done(entry: dict[str, Any]) -> None:
        nonlocal step
        step += 1
        progress(
            f"[{step}/{total}] {entry['case']}, batch {entry['batch']}, body {entry['body']}: "
            f"{entry['events/s']:,.0f} events/s"
            + (f", {entry['MB/s']:,.1f} MB/s" if "MB/s" in entry else "")
            + f" ({entry['events']:,} events in {entry['seconds']:.2f} s)"
        )

    progress(f"channel_bench: writing to {work}")
    rows: list[dict[str, Any]] = []
    try:
        for batch, body in cases:
            events = make_batch(batch, body)

            channel = memory_channel(batch)
            warm_up(channel, events)
            count, put_s = put_loop(channel, events, seconds, MEMORY_MAX_EVENTS)
            take_s = take_loop(channel, batch, count)
            channel.stop()
            for case, elapsed in (("memory put+commit", put_s), ("memory take+commit", take_s)):
                entry = row(case, batch, body, count, elapsed)
                if batch == 1_000:
                    entry["target"] = f">= {MEMORY_TARGET // 1000}K events/s"
                    entry["met"] = verdict(entry["events/s"] >= MEMORY_TARGET)
                rows.append(entry)
                done(entry)

            # The ceiling is measured before and after the file channel, and the better run
            # kept: fsync latency on a shared or virtual disk drifts from second to second.
            batches, fsync_s = fsync_append(work / "append.bin", events, seconds, FILE_MAX_BYTES)
            before = row("fsync'd append (ceiling), run 1", batch, body, batches * batch, fsync_s)
            done(before)

            max_events = FILE_MAX_BYTES // body
            directory = work / f"file-{batch}-{body}"
            channel = file_channel(directory, batch, max_events + batch)
            warm_up(channel, events)
            count, put_s = put_loop(channel, events, seconds, max_events)
            take_s = take_loop(channel, batch, count)
            channel.stop()
            shutil.rmtree(directory)
            measured = [
                row(case, batch, body, count, elapsed)
                for case, elapsed in (("file put+commit", put_s), ("file take+commit", take_s))
            ]
            for entry in measured:
                done(entry)

            batches, fsync_s = fsync_append(work / "append.bin", events, seconds, FILE_MAX_BYTES)
            after = row("fsync'd append (ceiling), run 2", batch, body, batches * batch, fsync_s)
            done(after)
            ceiling = {
                **max(before, after, key=lambda r: r["MB/s"]),
                "case": "fsync'd append (ceiling, best of 2)",
                "runs MB/s": [before["MB/s"], after["MB/s"]],
            }
            rows.append(ceiling)
            for entry in measured:
                entry["fsync MB/s"] = ceiling["MB/s"]
                entry["ratio"] = entry["MB/s"] / ceiling["MB/s"]
                entry["target"] = f"ratio >= {FSYNC_RATIO_TARGET}"
                entry["met"] = verdict(entry["ratio"] >= FSYNC_RATIO_TARGET)
                rows.append(entry)

        rows.extend(tight_disk(work, seconds, done))
        rows.extend(replay(work / "replay", replay_events, done))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    report(
        "channel_bench",
        rows,
        [
            "case",
            "batch",
            "body",
            "events",
            "seconds",
            "events/s",
            "MB/s",
            "fsync MB/s",
            "ratio",
            "target",
            "met",
        ],
    )


if __name__ == "__main__":
    main()
