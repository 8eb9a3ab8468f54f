"""The round ledger on real processes: an application with known variables, a polling agent
(``artimon agent``) with a ``vhms`` sink into a VHMS (``artimon vhms``) and a ``raw`` sink
whose landing files Spark's ``raw_ingest`` turns into the Parquet history. A round is
complete only when both hold all its samples: with VHMS stopped a round waits at ``vhms``
(in the sink's channel) and completes when VHMS is back; while ``raw_ingest`` has not run,
a round waits at ``history`` (in its landing file) and completes when the job reported."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from artimon.servers import free_port
from artimon.stack import agent_properties
from artimon.testing import StackProcess, start_agent_process, start_ready_process
from bookkeeper.testing import AppProcess, start_app
from vhms import VhmsClient

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SAMPLES = 13  # the test app's 10 counters, a DOUBLE, a BOOLEAN and a STRING
SINK = "sink out (channel ch)"


@dataclass
class Stack:
    root: Path
    vhms_port: int
    monitor_port: int
    app: AppProcess
    agent: Any
    vhms: StackProcess | None = None

    @property
    def ledger_url(self) -> str:
        return f"http://127.0.0.1:{self.monitor_port}/ledger"

    def start_vhms(self) -> None:
        command = [sys.executable, "-m", "artimon", "vhms", "--no-register", "--port", str(self.vhms_port)]
        command += ["--data-dir", str(self.root / "vhms"), "--resolutions", "1s:600"]
        process, line = start_ready_process(command, self.root / "vhms.log", "serving")
        self.vhms = StackProcess(process, self.root / "vhms.log", line)

    def stop_vhms(self) -> None:
        assert self.vhms is not None
        self.vhms.stop(signal.SIGTERM)
        self.vhms = None

    def rounds(self) -> list[dict[str, Any]]:
        answer = httpx.get(self.ledger_url, timeout=10)
        assert answer.status_code == 200, answer.text
        return answer.json()["rounds"]  # type: ignore[no-any-return]

    def find(self, condition: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        return next((entry for entry in self.rounds() if condition(entry)), None)

    def state_of(self, round_ms: int) -> dict[str, Any]:
        found = self.find(lambda entry: entry["round"] == round_ms)
        assert found is not None, f"round {round_ms} left the ledger"
        return found

    def ingest(self, spark: Any) -> None:
        from spark_jobs import raw_ingest  # pyspark's import is slow: only here

        raw_ingest.ingest_once(
            spark,
            (self.root / "landing").as_uri(),
            (self.root / "parquet").as_uri(),
            (self.root / "checkpoint").as_uri(),
            ledger=[self.ledger_url],
        )

    def parquet_samples(self, round_ms: int) -> int:
        table = pq.read_table(self.root / "parquet", columns=["series", "ts"])
        ts_ms = table["ts"].cast(pa.timestamp("ms")).cast(pa.int64()).to_pylist()
        series = table["series"].to_pylist()
        return sum(
            1 for name, ts in zip(series, ts_ms, strict=True) if ts == round_ms and name.startswith("test.")
        )

    def vhms_counters(self, round_ms: int) -> int:
        with VhmsClient("127.0.0.1", self.vhms_port, timeout=10) as client:
            result = client.fetch("test.counter", round_ms, round_ms + 1000, 1)
        at_round = result.values[:, list(result.timestamps).index(round_ms)]
        return int((at_round == at_round).sum())  # the series with a value (not NaN) at the round


def properties(zk_hosts: str, root: Path, vhms_port: int) -> str:
    return agent_properties(
        "a",
        sources={
            "poll": {
                "type": "artimon",
                "zk": zk_hosts,
                "interval": 2,
                "contexts": "ledger\\.app",
                "channels": "ch land",
            }
        },
        channels={"ch": {"type": "memory", "capacity": 1000}, "land": {"type": "memory", "capacity": 1000}},
        sinks={
            "out": {
                "type": "vhms",
                "channel": "ch",
                "servers": f"default@127.0.0.1:{vhms_port}",
                "timeout": 2,
                "memberBackoff": 0.2,
                "maxMemberBackoff": 1,
                "maxBackoffSleep": 200,
            },
            "raw": {"type": "raw", "channel": "land", "directory": root / "landing", "rollInterval": 1},
        },
    )


@pytest.fixture
def stack(tmp_path: Path, zk_hosts: str) -> Iterator[Stack]:
    app = start_app("ledger.app", zk_hosts, variables=10)
    config = tmp_path / "agent.properties"
    vhms_port = free_port()
    config.write_text(properties(zk_hosts, tmp_path, vhms_port))
    built = Stack(tmp_path, vhms_port, free_port(), app, None)
    try:
        built.start_vhms()
        built.agent = start_agent_process(config, "a", monitor_port=built.monitor_port)
        yield built
    finally:
        if built.agent is not None:
            StackProcess(built.agent, config.with_suffix(".log"), "").stop()
        if built.vhms is not None:
            built.stop_vhms()
        app.kill()


def waits(entry: dict[str, Any]) -> dict[str, list[str]]:
    return {w["terminal"]: w["where"] for w in entry["waiting"]}


def landing_file(entry: dict[str, Any]) -> str:
    """The name of the landing file a round waits in (``landing file <name> (...)``)."""
    [where] = waits(entry)["history"]
    assert where.startswith("landing file "), where
    return where.split()[2]


def test_a_round_is_complete_only_when_vhms_and_the_history_hold_all_its_samples(
    stack: Stack, spark: Any, wait: Callable[..., None]
) -> None:
    # VHMS up, raw_ingest not run yet: a round is in VHMS and waits at history, in its landing file
    def in_vhms_and_landed(entry: dict[str, Any]) -> bool:
        landed = [w.startswith("landing file ") for w in waits(entry).get("history", [])] == [True]
        return entry["committed"]["vhms"] == SAMPLES and "vhms" not in waits(entry) and landed

    wait(lambda: stack.find(in_vhms_and_landed), timeout=120, what="a round in VHMS and in a landing file")
    first = stack.find(in_vhms_and_landed)
    assert first is not None and first["state"] == "waiting"
    assert first["expected"] == SAMPLES and first["endpoints"] == 1 and first["committed"]["history"] == 0
    assert stack.vhms_counters(first["round"]) == 10
    rolled = stack.root / "landing" / landing_file(first)
    wait(rolled.exists, timeout=60, what=f"{rolled.name} rolled")

    # raw_ingest commits that file and reports it: the round is complete, the history holds it
    stack.ingest(spark)
    done = stack.state_of(first["round"])
    assert done["state"] == "complete" and done["waiting"] == []
    assert done["committed"] == {"history": SAMPLES, "vhms": SAMPLES}
    assert stack.parquet_samples(first["round"]) == SAMPLES

    # VHMS stopped: the next rounds wait at vhms, in the sink's channel, and say how long
    stopped_ms = int(time.time() * 1000)
    stack.stop_vhms()

    def held_back(entry: dict[str, Any]) -> bool:
        landed = [w.startswith("landing file ") for w in waits(entry).get("history", [])] == [True]
        at_vhms = waits(entry).get("vhms") == [SINK] and entry["committed"]["vhms"] == 0
        return entry["round"] > stopped_ms and at_vhms and landed

    wait(lambda: stack.find(held_back), timeout=120, what="a round waiting at vhms")
    second = stack.find(held_back)
    assert second is not None and second["state"] == "waiting"
    wait((stack.root / "landing" / landing_file(second)).exists, timeout=60, what="its landing file rolled")
    gauges = httpx.get(stack.ledger_url.replace("/ledger", "/metrics"), timeout=10).json()["LEDGER.rounds"]
    assert gauges["RoundsIncomplete"] >= 1 and gauges["OldestIncompleteRoundAgeSeconds"] > 0

    # the history takes it, VHMS does not have it: still waiting, at vhms only
    stack.ingest(spark)
    now = stack.state_of(second["round"])
    assert now["state"] == "waiting" and now["committed"] == {"history": SAMPLES, "vhms": 0}
    assert waits(now) == {"vhms": [SINK]}
    assert stack.parquet_samples(second["round"]) == SAMPLES

    # VHMS back: the sink delivers what its channel kept, and the round completes
    stack.start_vhms()
    wait(
        lambda: stack.state_of(second["round"])["state"] == "complete",
        timeout=120,
        what=f"round {second['round']} complete once VHMS is back",
    )
    assert stack.state_of(second["round"])["committed"] == {"history": SAMPLES, "vhms": SAMPLES}
    assert stack.vhms_counters(second["round"]) == 10
