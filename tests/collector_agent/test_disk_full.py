"""A file channel on a disk that fills up, then frees: puts that cannot be made durable fail
before anything is handed on, the channel's bookkeeping goes on in its reserve, puts resume
as soon as there is room with no restart, and nothing a sink committed is delivered again,
across a restart too. On a real small filesystem: a tmpfs mounted for the test."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from artimon.servers import free_port
from artimon.stack import agent_properties
from artimon.testing import start_agent_process
from collector_agent import Agent, BatchSink, ChannelException, Context, Event, FileChannel, Status

BODY = 1024


@contextlib.contextmanager
def tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` at ``mount``, unmounted at the end; skipped unless root may mount."""
    mount.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError as exc:
        pytest.skip(f"cannot run mount: {exc}")
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs needs root (as in CI); here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30)


def fill_up(path: Path) -> None:
    """Write ``path`` until the disk refuses (as another process filling the disk would)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 512)
    finally:
        os.close(fd)


def body(n: int) -> bytes:
    return f"{n:08d}".encode() * (BODY // 8)


def number(event: Event) -> int:
    return int(event.body[:8])


def open_channel(directory: Path, reserve: int) -> FileChannel:
    channel = FileChannel("full")
    channel.configure(
        Context(
            {
                "dataDirs": str(directory),
                "minimumRequiredSpace": "1048576",
                "reservedSpace": str(reserve),
                "keep-alive": "0",
            },
            "a1.channels.full.",
        )
    )
    channel.start()
    return channel


def put(channel: FileChannel, start: int, count: int) -> None:
    with channel.transaction() as tx:
        tx.put_batch([Event({}, body(n)) for n in range(start, start + count)])


class Downstream(BatchSink):
    """The next hop: keeps every event it is handed."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.received: list[bytes] = []

    def deliver(self, events: list[Event]) -> None:
        self.received.extend(e.body for e in events)


def drain(sink: Downstream, channel: FileChannel) -> None:
    for _ in range(10_000):
        if sink.process() is Status.BACKOFF and channel.size == 0:
            return
    raise AssertionError(f"{channel.size} events left in the channel")


def test_a_full_disk_neither_loses_nor_duplicates(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "8m") as disk:
        channel = open_channel(disk / "channel", reserve=1024 * 1024)
        sink = Downstream("next")
        sink.configure(Context({"batchSize": "100"}, "a1.sinks.next."))
        sink.channel = channel
        sink.start()
        try:
            for start in range(0, 2000, 100):  # 2,000 acknowledged events, about 2 MiB
                put(channel, start, 100)
            fill_up(disk / "filler")
            assert os.statvfs(disk).f_bavail == 0

            # puts go on while the log's file has blocks to reuse and the last look at the
            # disk (at most a second old) had room; then one that cannot be made durable
            # fails, and nothing of it is visible
            accepted = 2000
            with pytest.raises(ChannelException):
                while accepted < 4000:
                    put(channel, accepted, 100)
                    accepted += 100
            assert channel.size == accepted

            # every take commits, recorded in the reserve the channel gave up
            drain(sink, channel)
            assert len(sink.received) == len(set(sink.received)) == accepted
            assert channel.metrics()["ReserveReleaseCount"] >= 1

            (disk / "filler").unlink()
            for start in range(accepted, accepted + 500, 100):  # the source's retry, and more
                put(channel, start, 100)
            assert channel.space.reserve.short == 0  # allocated again by the first put
            drain(sink, channel)
        finally:
            sink.stop()
            channel.stop()
        assert sorted(sink.received) == [body(n) for n in range(accepted + 500)]
        again = open_channel(disk / "channel", reserve=1024 * 1024)
        try:
            assert again.size == 0  # nothing delivered comes back
        finally:
            again.stop()


def test_a_take_that_cannot_be_recorded_is_not_committed(tmp_path: Path) -> None:
    """The reserve already spent and the disk full again: a take's commit fails rather than
    return unrecorded, and its events come back at the head (delivered again: at least once)."""
    with tmpfs(tmp_path / "disk", "8m") as disk:
        channel = open_channel(disk / "channel", reserve=1024 * 1024)
        try:
            for start in range(0, 500, 100):
                put(channel, start, 100)
            channel.commit_log.checkpoint("TRUNCATE")  # the log's file empty: a commit needs blocks
            channel.space.release()  # as after an earlier full disk ...
            fill_up(disk / "filler")  # ... and another writer took that room too

            tx = channel.transaction()
            tx.begin()
            taken = [number(e) for e in tx.take_batch(100)]
            with pytest.raises(ChannelException, match="disk is full"):
                tx.commit()
            tx.rollback()
            tx.close()
            assert channel.size == 500
            assert channel.metrics()["EventTakeErrorCount"] == 1

            (disk / "filler").unlink()
            with channel.transaction() as tx:
                assert [number(e) for e in tx.take_batch(100)] == taken
        finally:
            channel.stop()
        again = open_channel(disk / "channel", reserve=1024 * 1024)
        try:
            assert again.size == 400
            with again.transaction() as tx:
                assert [number(e) for e in tx.take_batch(100)] == list(range(100, 200))
        finally:
            again.stop()


def test_a_restart_keeps_the_reserve_it_left(tmp_path: Path) -> None:
    """The reserve's file holds its blocks across a restart: a disk with room for puts but
    not for a second reserve still takes puts."""
    with tmpfs(tmp_path / "disk", "8m") as disk:
        open_channel(disk / "channel", reserve=2 * 1024 * 1024).stop()
        fill_up(disk / "filler")
        os.truncate(disk / "filler", os.path.getsize(disk / "filler") - 1536 * 1024)  # 1.5 MiB free
        channel = open_channel(disk / "channel", reserve=2 * 1024 * 1024)
        try:
            assert channel.space.reserve.short == 0
            put(channel, 0, 100)  # 100 KiB: leaves more than minimumRequiredSpace
            assert channel.size == 100
        finally:
            channel.stop()


class Ledger:
    """Every event's fate, kept by the source and sink threads of the scenario; the sink
    takes while ``draining`` is set."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.draining = threading.Event()
        self.put: set[int] = set()  # put and committed into the channel
        self.refused = 0  # events of refused puts (the source kept and retried them)
        self.refusals = 0  # refused put transactions
        self.taken: list[int] = []  # every event handed to the sink, each time
        self.committed: set[int] = set()  # events whose take the sink committed
        self.uncommitted = 0  # events taken whose take commit failed (rolled back)
        self.last_put = 0.0


def run_source(channel: FileChannel, ledger: Ledger, stop: threading.Event) -> None:
    """Puts batches of 50 events; a refused batch is kept and tried again 20 ms later."""
    next_event = 0
    while not stop.is_set():
        try:
            put(channel, next_event, 50)
        except ChannelException:
            with ledger.lock:
                ledger.refused += 50
                ledger.refusals += 1
            stop.wait(0.02)
            continue
        with ledger.lock:
            ledger.put.update(range(next_event, next_event + 50))
            ledger.last_put = time.monotonic()
        next_event += 50
        stop.wait(0.002)


def run_sink(channel: FileChannel, ledger: Ledger, stop: threading.Event) -> None:
    """Takes batches of 100 and commits them, as a sink does, while the ledger says so."""
    while not stop.is_set():
        if not ledger.draining.wait(0.05):
            continue
        taken: list[int] = []
        try:
            with channel.transaction() as tx:
                taken = [number(e) for e in tx.take_batch(100)]
                with ledger.lock:
                    ledger.taken.extend(taken)
        except ChannelException:
            with ledger.lock:
                ledger.uncommitted += len(taken)
            stop.wait(0.05)
            continue
        with ledger.lock:
            ledger.committed.update(taken)
        if not taken:
            stop.wait(0.01)


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > seconds:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.02)
    return time.monotonic() - started


def threads(channel: FileChannel, ledger: Ledger, stop: threading.Event) -> list[threading.Thread]:
    started = [
        threading.Thread(target=run, args=(channel, ledger, stop), daemon=True)
        for run in (run_source, run_sink)
    ]
    for thread in started:
        thread.start()
    return started


def drain_after_restart(channel: FileChannel, ledger: Ledger) -> list[int]:
    """Take everything left, as the sink after a restart; the events it had committed before."""
    before_restart = set(ledger.committed)
    redelivered: list[int] = []
    while True:
        with channel.transaction() as tx:
            taken = [number(e) for e in tx.take_batch(500)]
        if not taken:
            return redelivered
        redelivered.extend(n for n in taken if n in before_restart)
        ledger.taken.extend(taken)
        ledger.committed.update(taken)


@pytest.mark.slow
def test_a_full_disk_heals_by_itself_and_a_restart_redelivers_nothing(tmp_path: Path) -> None:
    """Issue 28's scenario: a file channel on a 20 MiB disk that another writer fills while
    its sink drains it; 12 MB freed; puts resume within 10 s with no restart, and 20 MB more
    pass through the channel; a clean stop and start on the same directory delivers nothing
    the sink had committed."""
    with tmpfs(tmp_path / "disk", "20m") as disk:
        channel = open_channel(disk / "channel", reserve=2 * 1024 * 1024)
        ledger, stop = Ledger(), threading.Event()
        running = threads(channel, ledger, stop)
        try:
            wait_for(lambda: len(ledger.put) >= 2000, 60, "2,000 events put")  # a backlog of 2 MB
            fill_up(disk / "filler")
            wait_for(lambda: ledger.refusals >= 20, 30, "puts refused on the full disk")
            put_when_full = len(ledger.put)
            ledger.draining.set()
            wait_for(lambda: len(ledger.committed) >= put_when_full, 30, "the backlog taken on the full disk")
            assert len(ledger.put) == put_when_full  # puts still refused: the reserve is not theirs

            os.truncate(disk / "filler", os.path.getsize(disk / "filler") - 12_000_000)
            freed = time.monotonic()
            resumed = wait_for(lambda: ledger.last_put > freed, 10, "puts resumed after 12 MB freed")
            put_by_then = len(ledger.put)
            wait_for(lambda: len(ledger.put) >= put_by_then + 20_000, 120, "20 MB more through the channel")
            ledger.draining.clear()  # a backlog to hold across the restart
            wait_for(lambda: channel.size >= 1000, 30, "a backlog of 1,000 events")
        finally:
            stop.set()
            for thread in running:
                thread.join(timeout=30)
            metrics = channel.metrics()
            wal = disk / "channel" / "channel.db-wal"
            wal_bytes = wal.stat().st_size if wal.exists() else 0
            channel.stop()  # a clean stop, as at SIGTERM
        left = channel.size

        again = open_channel(disk / "channel", reserve=2 * 1024 * 1024)
        try:
            assert again.size == left
            redelivered = drain_after_restart(again, ledger)
        finally:
            again.stop()

    print(
        f"\nevents put {len(ledger.put)}, refused {ledger.refused} ({ledger.refusals} puts, "
        f"EventPutErrorCount {metrics['EventPutErrorCount']:.0f}), taken {len(ledger.taken)}, "
        f"committed {len(ledger.committed)}, take commits failed {ledger.uncommitted} events, "
        f"left at the stop {left}, redelivered after the restart {len(redelivered)}; "
        f"reserve released {metrics['ReserveReleaseCount']:.0f} times; puts resumed {resumed:.2f} s "
        f"after 12 MB were freed; the log's file {wal_bytes} bytes at the stop"
    )
    assert metrics["EventPutErrorCount"] == ledger.refusals > 0
    assert resumed < 10
    assert redelivered == []
    assert ledger.committed == ledger.put  # nothing lost
    duplicates = len(ledger.taken) - len(set(ledger.taken))
    assert duplicates <= ledger.uncommitted  # only takes whose commit failed come again


def sender_properties(channel_dir: Path, port: int, total: int) -> str:
    """A seq source of ``total`` events into a file channel on the small disk (its capacity
    keeps the backlog small: the source is far faster than the sink), sent on by a Thrift
    sink to the test's receiver."""
    return agent_properties(
        "a1",
        sources={"r1": {"type": "seq", "channels": "c1", "batchSize": 100, "totalEvents": total}},
        channels={
            "c1": {
                "type": "file",
                "dataDirs": channel_dir,
                "minimumRequiredSpace": 1048576,
                "reservedSpace": 2097152,
                "capacity": 20_000,
                "keep-alive": 1,
            }
        },
        sinks={
            "k1": {"type": "thrift", "channel": "c1", "hostname": "127.0.0.1", "port": port, "batchSize": 500}
        },
    )


def start_receiver() -> Agent:
    """The next hop, in this process: a Thrift source into a memory channel the test reads."""
    properties = agent_properties(
        "r",
        sources={"src": {"type": "thrift", "bind": "127.0.0.1", "port": 0, "channels": "ch"}},
        channels={
            "ch": {"type": "memory", "capacity": 2_000_000, "transactionCapacity": 100_000},
            "unused": {"type": "memory"},
        },
        sinks={"k": {"type": "null", "channel": "unused"}},
    )
    receiver = Agent.from_properties(properties, "r", {})
    receiver.start()
    return receiver


def received(receiver: Agent, into: list[int]) -> int:
    """Move what the receiver holds into ``into``; how many it holds now."""
    channel = receiver.channels["ch"]
    while True:
        with channel.transaction() as tx:
            events = tx.take_batch(100_000)
        if not events:
            return len(into)
        into.extend(int(e.body) for e in events)


def terminate(agent: subprocess.Popen[str]) -> None:
    """Stop ``agent`` as an operator does: SIGTERM, and wait for it to exit."""
    agent.send_signal(signal.SIGTERM)
    agent.wait(timeout=60)
    if agent.stdout is not None:
        agent.stdout.close()


def metrics(port: int) -> dict[str, dict[str, float]]:
    answer: dict[str, dict[str, float]] = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).json()
    return answer


@pytest.mark.slow
def test_an_agent_on_a_full_disk_heals_by_itself_and_its_restart_redelivers_nothing(tmp_path: Path) -> None:
    """The same with a real agent process (seq source -> file channel -> Thrift sink), stopped
    by SIGTERM and started again on the same directory."""
    with tmpfs(tmp_path / "disk", "20m") as disk:
        receiver = start_receiver()
        port = receiver.sources["src"].port  # type: ignore[attr-defined]
        config, monitor = tmp_path / "a1.properties", free_port()
        config.write_text(sender_properties(disk / "c1", port, total=400_000))
        got: list[int] = []
        sender = start_agent_process(config, "a1", monitor_port=monitor)
        try:
            wait_for(lambda: received(receiver, got) >= 20_000, 60, "20,000 events through the agent")
            fill_up(disk / "filler")
            wait_for(lambda: metrics(monitor)["CHANNEL.c1"]["EventPutErrorCount"] >= 10, 30, "puts refused")
            accepted = metrics(monitor)["SOURCE.r1"]["EventAcceptedCount"]
            os.truncate(disk / "filler", os.path.getsize(disk / "filler") - 12_000_000)
            resumed = wait_for(
                lambda: metrics(monitor)["SOURCE.r1"]["EventAcceptedCount"] > accepted, 10, "puts resumed"
            )
            more = accepted + 100_000  # on a 20 MiB disk: far more than it holds, through its log
            wait_for(
                lambda: metrics(monitor)["SOURCE.r1"]["EventAcceptedCount"] >= more, 120, "100,000 more put"
            )
            before_stop = metrics(monitor)
        finally:
            terminate(sender)
        received(receiver, got)
        before_restart, delivered_before = set(got), len(got)

        config.write_text(sender_properties(disk / "c1", port, total=0))  # no new events
        again = start_agent_process(config, "a1", monitor_port=monitor)
        try:
            replayed = metrics(monitor)["CHANNEL.c1"]["ChannelSize"]
            wait_for(lambda: metrics(monitor)["CHANNEL.c1"]["ChannelSize"] == 0, 60, "the restart drained")
        finally:
            terminate(again)
        received(receiver, got)
        receiver.stop()

    after = got[delivered_before:]
    redelivered = [n for n in after if n in before_restart]
    source, channel, sink = (before_stop[key] for key in ("SOURCE.r1", "CHANNEL.c1", "SINK.k1"))
    print(
        f"\nat the last look before SIGTERM: put {source['EventAcceptedCount']:.0f}, refused "
        f"{source['ChannelWriteFail'] * 100:.0f} ({source['ChannelWriteFail']:.0f} puts, EventPutErrorCount "
        f"{channel['EventPutErrorCount']:.0f}), taken {channel['EventTakeSuccessCount']:.0f}, committed by "
        f"the sink {sink['EventDrainSuccessCount']:.0f}, reserve released "
        f"{channel['ReserveReleaseCount']:.0f} times; puts resumed {resumed:.2f} s after 12 MB were "
        f"freed; received before the restart "
        f"{delivered_before}, replayed at the restart {replayed:.0f}, received after it {len(after)}, "
        f"redelivered {len(redelivered)}, duplicates in all {len(got) - len(set(got))}"
    )
    assert channel["EventPutErrorCount"] > 0
    assert resumed < 10
    assert redelivered == []
    assert len(got) == len(set(got)) and set(got) == set(range(len(got)))  # once each, none lost
