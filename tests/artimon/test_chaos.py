"""Issue 15's closing test: through faults, no acknowledged sample is lost and no process is
orphaned. The real stack in separate processes (``artimon.testing.Stack``, and ``artimon
up`` itself), applications whose counters follow :func:`bookkeeper.testing.formula_value`
at one-second rounds, and:

- VHMS SIGKILLed five times while rounds flow, each time right after the ``vhms`` sink
  committed a batch or at a random point of a round, and restarted on its data directory;
- with ZooKeeper ACLs on, an anonymous client trying to register a fake VHMS replica (and
  to remove the real one), then a registered replica that accepts TCP and never answers;
- damaged bytes in the file channel's database while the agent is stopped;
- ``artimon up`` SIGKILLed five times and restarted on the same ``--data-dir``.

Then every sample the sink counted as committed is in VHMS once, every round polled is in
Parquet once with its value (in VHMS too, unless its event was damaged: then it is in the
dead-letter file and counted), every round ``up`` had stored before a kill is in its VHMS
and its Parquet history, and no process of a killed ``up`` is left alive."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import random
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from artimon.testing import Stack
from bookkeeper.testing import AppProcess, descendants, formula_value, running, start_app
from bookkeeper.wire import parse_series
from bookkeeper.zk import AUTH_ENV, AUTH_FILE_ENV, Registration, resolve_zk
from spark_jobs import raw_ingest
from vhms import VhmsClient

pytestmark = [pytest.mark.slow, pytest.mark.spark]

STEP = 1000  # one-second rounds
VARIABLES = 5
KILLS = 5
SINK_TIMEOUT = 5.0  # the Stack's vhms sink: a call to a member that does not answer ends then
ARTIMON = [sys.executable, "-m", "artimon"]


# -- reading what was stored ---------------------------------------------------------------


def held_samples(stack: Stack, first: int, last: int) -> dict[tuple[str, int], float]:
    """Every numeric sample of the applications VHMS holds: (series key, time) -> value."""
    with stack.vhms_client() as client:
        result = client.fetch(r"~test\..*", first, last + STEP, 1)
    held: dict[tuple[str, int], float] = {}
    for row, key in enumerate(result.keys):
        for column, stamp in enumerate(result.timestamps.tolist()):
            value = float(result.values[row, column])
            if value == value:  # not NaN: a sample
                held[(key, int(stamp))] = value
    return held


def expected_value(key: str, stamp: int) -> float:
    name, labels = parse_series(key)
    if name == "test.counter":
        return float(formula_value(int(labels["i"]), stamp, STEP))
    return {"test.gauge": 0.5, "test.up": 1.0}[name]


def parquet_counters(path: Path) -> Counter[tuple[str, int, int]]:
    """(context, i, round) of each ``test.counter`` row of a Parquet history, counted; every
    value checked against the formula on the way."""
    frame = pd.read_parquet(path, columns=["series", "ts", "value"])
    rows: Counter[tuple[str, int, int]] = Counter()
    wrong = []
    for series, ts, value in zip(frame["series"], frame["ts"], frame["value"], strict=True):
        name, labels = parse_series(series)
        if name != "test.counter":
            continue
        key = (labels["context"], int(labels["i"]), int(pd.Timestamp(ts).value // 1_000_000))
        rows[key] += 1
        if value != formula_value(key[1], key[2], STEP):
            wrong.append((key, value))
    assert not wrong, f"Parquet values: {wrong[:5]}"
    return rows


# -- faults ---------------------------------------------------------------------------------


class HungServer:
    """Accepts every connection, reads whatever comes, never answers; records how long each
    connection stayed open (until the client gave up and closed it)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.held: list[float] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        accepted = time.monotonic()
        with conn, contextlib.suppress(OSError):
            while conn.recv(65536):
                pass
        self.held.append(time.monotonic() - accepted)

    def close(self) -> None:
        self.listener.close()


def waiting_events(db: Path) -> list[tuple[dict[str, str], bytes]]:
    """(headers, body) of each event waiting in a file channel's database, read as
    ``collector_agent/channels/file/format.py`` draws format 2 (batches partly taken left out)."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        taken = {seq for (seq,) in conn.execute("SELECT DISTINCT seq FROM consumed")}
        rows = conn.execute("SELECT seq, count, data, format FROM batches ORDER BY seq").fetchall()
    events = []
    for seq, count, data, version in rows:
        if version != 2 or seq in taken:
            continue
        first = 4 + 4 * count
        start = first
        for end in struct.unpack_from(f"<{count}I", data, 4):
            header_length, body_length = struct.unpack_from("<II", data, start)
            body_start = start + 8 + header_length
            events.append(
                (json.loads(data[start + 8 : body_start]), data[body_start : body_start + body_length])
            )
            start = first + end
    return events


def damage(db: Path, events: list[tuple[dict[str, str], bytes]]) -> set[tuple[str, int]]:
    """Flip one bit inside the body of each event, in the database file itself (SQLite sees
    nothing: its pages carry no checksum); the (context, round) of each."""
    image = db.read_bytes()
    hit = set()
    with open(db, "r+b") as out:
        for headers, body in events:
            for offset in range(0, len(body) - 16, 4):
                window = body[offset : offset + 16]
                if image.count(window) == 1:
                    at = image.index(window) + 8
                    out.seek(at)
                    out.write(bytes([image[at] ^ 0x10]))
                    break
            else:
                raise AssertionError(f"no unique bytes of {headers} found in {db}")
            hit.add((headers["artimon.context"], int(headers["artimon.round"])))
        out.flush()
        os.fsync(out.fileno())
    return hit


def dead_letters(path: Path) -> list[tuple[str, tuple[str, int]]]:
    """(reason, (context, round)) of each event a channel set aside."""
    found = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        stored = base64.b64decode(record["stored_base64"])
        (header_length,) = struct.unpack_from("<I", stored, 0)
        headers = json.loads(stored[8 : 8 + header_length])
        found.append((record["reason"], (headers["artimon.context"], int(headers["artimon.round"]))))
    return found


# -- the Stack: VHMS killed, a fake member, a damaged channel ---------------------------------


def test_vhms_kills_a_fake_member_and_damaged_channel_bytes_lose_no_committed_sample(
    tmp_path: Path, spark: Any, wait: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AUTH_ENV, f"artimon:{uuid.uuid4().hex}")  # ZooKeeper ACLs on, for every process
    monkeypatch.delenv(AUTH_FILE_ENV, raising=False)
    stack = Stack(tmp_path / "stack", interval=1, apps=1, endpoints=2, variables=VARIABLES, ring_seconds=600)
    rng = random.Random(15)
    faults: list[str] = []
    sink_runs: list[dict[str, float]] = []  # the vhms sink's counters, one per agent process
    replayed: list[str] = []
    first = stack.current_round() - STEP  # before the agent's first round
    with stack:

        def sink() -> dict[str, float]:
            return stack.agent_metrics()["SINK.store"]

        def committed() -> float:
            return sink()["EventDrainSuccessCount"]

        wait(lambda: committed() >= 1, 60, "a first committed batch")
        for kill in range(KILLS):
            before = committed()
            wait(lambda before=before: committed() > before, 60, f"a batch committed before kill {kill + 1}")
            if kill % 2:  # else right after that commit: only the write-ahead log holds it
                stack.wait_for_round(stack.current_round() + STEP, rng.random())
            faults.append(f"VHMS SIGKILL at {time.time() * 1000:.0f} ms")
            stack.kill_vhms()
            stack.start_vhms()
            assert stack.vhms is not None
            replayed.append(stack.vhms.ready_line)
        before = committed()
        wait(lambda: committed() > before, 60, "a batch committed after the last kill")

        # ACLs on: an anonymous client can neither add a replica nor remove the real one
        connect, layout = resolve_zk(stack.zk)
        hung = HungServer()
        member = layout.vhms_member("default", "127.0.0.1", hung.port)
        payload = json.dumps({"shard": "default", "host": "127.0.0.1", "port": hung.port}).encode()
        anonymous = KazooClient(hosts=connect)
        anonymous.start(timeout=30)
        try:
            with pytest.raises(NoAuthError):
                anonymous.create(member, payload, ephemeral=True)
            with pytest.raises(NoAuthError):
                anonymous.create(layout.vhms_member("s2", "127.0.0.1", hung.port), payload, makepath=True)
            host, port = stack.vhms_address
            with pytest.raises(NoAuthError):
                anonymous.delete(layout.vhms_member("default", host, port))
        finally:
            anonymous.stop()
            anonymous.close()
        # a replica registered with the platform's credentials that accepts and never answers
        fails = sink()["MemberFailCount"]
        replica = Registration(connect, member, payload)
        replica.start()
        try:
            assert replica.registered.wait(30)
            faults.append(f"hung replica registered at {time.time() * 1000:.0f} ms")
            try:
                wait(lambda: hung.held, SINK_TIMEOUT + 30, "the sink to give up on the hung replica")
            except AssertionError as exc:  # what the sink did meanwhile
                log = stack.running_agent().log.read_text().splitlines()[-15:]
                raise AssertionError(f"{exc}; sink {sink()}; agent log:\n" + "\n".join(log)) from None
            given_up = stack.current_round()
            wait(lambda: sink()["MemberFailCount"] > fails, 10, "the hung replica counted")
            wait(  # passed over from then on: the next rounds are stored without waiting for it
                lambda: any(
                    t >= given_up + 2 * STEP for _, t in held_samples(stack, given_up, given_up + 4 * STEP)
                ),
                6,
                "writes to go on past the hung replica",
            )
        finally:
            replica.close()
            hung.close()
        assert len(hung.held) == 1 and hung.held[0] < SINK_TIMEOUT + 1.0, hung.held

        # damaged bytes in the vhms sink's channel while the agent is stopped
        stack.stop_vhms()  # a backlog builds in the channel
        backlog = stack.agent_metrics()["CHANNEL.tovhms"]["ChannelSize"]
        wait(
            lambda: stack.agent_metrics()["CHANNEL.tovhms"]["ChannelSize"] >= backlog + 8,
            30,
            "a backlog of four rounds",
        )
        sink_runs.append(sink())  # final: nothing can be committed while VHMS is down
        stack.stop_agent()
        db = stack.root / "agent" / "tovhms" / "channel.db"
        waiting = waiting_events(db)
        damaged = damage(db, [waiting[1], waiting[len(waiting) // 2], waiting[-1]])
        faults.append(f"{len(damaged)} events damaged: {sorted(damaged)}")
        stack.start_vhms()
        stack.start_agent()
        wait(
            lambda: stack.agent_metrics()["CHANNEL.tovhms"]["EventDamagedCount"] == len(damaged), 60, "damage"
        )
        wait(  # a round's events at most
            lambda: stack.agent_metrics()["CHANNEL.tovhms"]["ChannelSize"] <= 2, 60, "the backlog drained"
        )

        # the applications stop: the last rounds drain and the counters settle
        for app in stack.applications:
            app.kill(signal.SIGTERM)
        stack.wait_for_round(stack.current_round() + 2 * STEP)  # polls under way end (readTimeout 1 s)
        for channel in ("tovhms", "toraw"):
            wait(
                lambda channel=channel: stack.agent_metrics()[f"CHANNEL.{channel}"]["ChannelSize"] == 0,
                60,
                f"{channel} to drain",
            )
        empty = sink()["BatchEmptyCount"]  # an empty take after it: the last batch is counted
        wait(lambda: sink()["BatchEmptyCount"] > empty, 10, "the sink to find nothing more")
        sink_runs.append(sink())
        stack.stop_agent()  # cleanly: the raw sink rolls its last landing file
        last = stack.current_round()
        held = held_samples(stack, first, last)
        dead = dead_letters(stack.root / "agent" / "dead-letter" / "channel-tovhms.jsonl")

    # every round polled is in Parquet once, with its value: in VHMS too, or set aside
    assert not list(stack.landing().glob("*.tmp"))
    raw_ingest.ingest_once(
        spark, str(stack.landing()), f"file://{tmp_path}/parquet", str(tmp_path / "checkpoint")
    )
    rows = parquet_counters(tmp_path / "parquet")
    assert max(rows.values()) == 1, [key for key, n in rows.items() if n > 1][:5]
    polled = {(context, stamp) for context, _, stamp in rows}
    assert all(rows[(c, i, r)] == 1 for c, r in polled for i in range(VARIABLES))
    rounds_held = {(parse_series(key)[1]["context"], stamp) for key, stamp in held}
    assert polled == rounds_held | damaged, (
        f"polled, not in VHMS nor set aside: {sorted(polled - rounds_held - damaged)[:5]}, "
        f"in VHMS, not polled: {sorted(rounds_held - polled)[:5]}; {faults}"
    )

    # every sample the sink committed is in VHMS, once, with its value
    wrong = [(key, value) for key, value in held.items() if value != expected_value(*key)]
    assert not wrong, f"VHMS values: {wrong[:5]}; {faults}"
    assert len(held) == len(rounds_held) * (VARIABLES + 2)  # every variable of each round
    assert len(held) == sum(run["SamplesStoredCount"] for run in sink_runs), faults
    assert len(rounds_held) == sum(run["EventDrainSuccessCount"] for run in sink_runs), faults
    assert all(" 0 write-ahead log records replayed" not in line for line in replayed), replayed

    # the damaged events were set aside and counted, not delivered
    assert sorted(where for _, where in dead) == sorted(damaged)
    assert {reason for reason, _ in dead} == {"checksum mismatch"}
    assert not damaged & rounds_held


# -- artimon up killed five times -------------------------------------------------------------


class Lines:
    """A process's output lines, read by a thread, waited for with a deadline."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))

    def until(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.2)
            except queue.Empty:
                if self.process.poll() is not None and self._queue.empty():
                    break
                continue
            self.seen.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no {prefix!r} line within {timeout} s: {self.seen}")


def start_time(pid: int) -> str | None:
    """A process's start time (``/proc/<pid>/stat`` field 22): a PID reused is another process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    except OSError:
        return None


class Up:
    """One ``artimon up`` on the shared data directory, on ports of its own, and the
    application it polls (registered in this run's ZooKeeper)."""

    def __init__(self, data: Path, log: Path, *, spark: bool) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("ARTIMON_ZK", AUTH_ENV, AUTH_FILE_ENV)}
        env["ARTIMON_SPARK_DRIVER_MEMORY"] = "1g"
        command = [*ARTIMON, "up", "--data-dir", str(data), "--interval", "1"]
        command += ["--zk-port", "0", "--api-port", "0", "--thrift-port", "0"]
        with open(log, "a") as errors:
            self.process = subprocess.Popen(
                command if spark else [*command, "--no-spark"],
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                env=env,
            )
        self.output = Lines(self.process)
        self.app: AppProcess | None = None
        self.vhms_ready = ""
        self.vhms = ("", 0)

    def ready(self) -> Up:
        """Wait for the agent's ready line, then start the application."""
        zookeeper = self.output.until("[ready] zookeeper", 120)
        self.vhms_ready = self.output.until("[ready] vhms", 120)
        self.output.until("[ready] agent", 120)
        host, _, port = self.vhms_ready.split()[2].rstrip(",").rpartition(":")
        self.vhms = (host, int(port))
        credentials = zookeeper.rpartition(" ")[2]  # ARTIMON_ZK_AUTH_FILE=<data>/zk.auth: ACLs on
        assert credentials.startswith(f"{AUTH_FILE_ENV}="), zookeeper
        self.app = start_app(
            "chaos",
            zookeeper.split()[2],
            variables=VARIABLES,
            aligned=1,
            env=dict([credentials.split("=", 1)]),
        )
        return self

    def rounds(self, since: int) -> dict[tuple[int, int], float]:
        """(i, round) -> value of the application's counters in this run's VHMS."""
        with VhmsClient(*self.vhms, timeout=10) as client:
            result = client.fetch("test.counter{context=chaos}", since, int(time.time() * 1000) + STEP, 1)
        held = {}
        for row, key in enumerate(result.keys):
            i = int(parse_series(key)[1]["i"])
            for column, stamp in enumerate(result.timestamps.tolist()):
                value = float(result.values[row, column])
                if value == value:
                    held[(i, int(stamp))] = value
        return held

    def processes(self) -> set[tuple[int, str | None]]:
        """``up`` and everything below it, each with its start time."""
        return {(pid, start_time(pid)) for pid in [self.process.pid, *descendants(self.process.pid)]}

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)
        if self.app is not None:
            self.app.kill()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        if self.app is not None and self.app.process.poll() is None:
            self.app.kill()
        self.output.reader.join(timeout=30)  # to the end of the output, before it is closed
        if self.process.stdout is not None:
            self.process.stdout.close()


def alive(processes: set[tuple[int, str | None]]) -> set[tuple[int, str | None]]:
    return {(pid, started) for pid, started in processes if running(pid) and start_time(pid) == started}


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # ended meanwhile
        return ""


def test_artimon_up_killed_five_times_orphans_nothing_and_keeps_every_acknowledged_round(
    tmp_path: Path, wait: Callable[..., None]
) -> None:
    data = tmp_path / "data"
    since = int(time.time() * 1000) // STEP * STEP - STEP
    rng = random.Random(15)
    acknowledged: dict[tuple[int, int], float] = {}  # stored in VHMS before a kill
    earlier: set[tuple[int, str | None]] = set()  # every process of the killed runs
    faults: list[str] = []
    try:
        for kill in range(KILLS):
            up = Up(data, tmp_path / "up.log", spark=False)
            try:
                up.ready()
                if kill:
                    assert " 0 series restored" not in up.vhms_ready, up.vhms_ready
                before = max((stamp for _, stamp in up.rounds(since)), default=0)
                wait(
                    lambda up=up, before=before: max((s for _, s in up.rounds(since)), default=0) > before,
                    60,
                    f"a round of run {kill + 1} stored",
                )
                processes = up.processes()
                acknowledged.update(up.rounds(since))
                if kill % 2:  # at a round's start, while its polls go into the two channels
                    next_round = (int(time.time() * 1000) // STEP + 1) * STEP
                    time.sleep(max(0.0, (next_round + rng.uniform(0, 60)) / 1000 - time.time()))  # a schedule
                up.kill()  # else right after a round was stored: only the write-ahead log holds it
                faults.append(f"up SIGKILL at {time.time() * 1000:.0f} ms, {len(processes)} processes")
                earlier |= processes
                wait(
                    lambda processes=processes: not alive(processes), 30, f"run {kill + 1}'s processes to die"
                )
            finally:
                up.close()

        last = Up(data, tmp_path / "up.log", spark=True)
        try:
            last.ready()
            assert not alive(earlier), alive(earlier)
            mine = {pid for pid, _ in last.processes()}
            strays = [  # anything else still running on this data directory
                (pid, command_line(pid))
                for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                if pid not in mine and str(data) in command_line(pid)
            ]
            assert not strays, strays
            try:
                wait(lambda: set(acknowledged) <= set(last.rounds(since)), 90, "acknowledged rounds")
            except AssertionError:
                lost = sorted(set(acknowledged) - set(last.rounds(since)))
                raise AssertionError(f"{len(lost)} acknowledged rounds lost: {lost[:5]}; {faults}") from None
            last.output.until("[ready] spark", 240)
            newest = max(stamp for _, stamp in last.rounds(since))
            wait(
                lambda: max(s for _, s in last.rounds(since)) > newest,
                30,
                "a round stored with Spark running",
            )
            held = last.rounds(since)
            processes = last.processes()
            last.process.send_signal(signal.SIGTERM)
            last.output.until("spark raw_ingest: history up to date", 120)
            last.output.until("stopped.", 60)
            assert last.process.wait(timeout=30) == 0
            wait(lambda: not alive(processes), 30, "the last run's processes to end")
        finally:
            last.close()
    finally:  # a process that outlived its run (a failure above) must not outlive the test
        for pid, _ in alive(earlier):
            os.kill(pid, signal.SIGKILL)

    wrong = [(key, value) for key, value in held.items() if value != formula_value(key[0], key[1], STEP)]
    assert not wrong, f"VHMS values: {wrong[:5]}"
    rows = parquet_counters(data / "history" / "parquet")
    history = Counter({(i, stamp): n for (context, i, stamp), n in rows.items() if context == "chaos"})
    missing = sorted(set(held) - set(history))
    assert not missing, f"rounds in VHMS missing from the Parquet history: {missing[:5]}; {faults}"
    assert max(history.values()) == 1, [key for key, n in history.items() if n > 1][:5]
