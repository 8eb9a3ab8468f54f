"""The proof that nothing is lost: the real stack in separate processes, applications whose
counters follow a known formula, faults and bad input at every edge; then every
(series, round) must be in VHMS and in the Parquet history exactly once with the right value."""

from __future__ import annotations

import random
import shutil
import socket
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from kazoo.client import KazooClient

from artimon.testing import Stack
from bookkeeper import EndpointInfo, resolve_zk
from bookkeeper.labels import parse_series
from bookkeeper.testing import formula_value
from spark_jobs import raw_ingest

pytestmark = [pytest.mark.slow, pytest.mark.spark]

RSS_BOUND = 400 * 2**20  # the agent's memory while its channel fills


class GarbageEndpoint:
    """A registered 'application' that answers every connection with junk bytes."""

    def __init__(self, zk: str) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()
        connect, layout = resolve_zk(zk)
        self.zk = KazooClient(hosts=connect)
        self.zk.start(timeout=30)
        info = EndpointInfo("127.0.0.1", self.port, "garbage", "g1", {})
        self.zk.create(
            layout.endpoint("garbage", "127.0.0.1", self.port, "g1"),
            info.to_json(),
            ephemeral=True,
            makepath=True,
        )

    def _serve(self) -> None:
        junk = random.Random(7)
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(bytes(junk.randrange(256) for _ in range(4096)))

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()
        self.server.close()


def garbage_to_the_flume_source(port: int) -> bytes:
    """Send a Flume Thrift source junk and a frame claiming 2 GB; what it answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"\x7f\xff\xff\xff" + bytes(range(256)) * 4)
        try:
            return conn.recv(1024)
        except ConnectionResetError:
            return b""


def junk_at_the_query_api(url: str) -> list[int]:
    """Junk DSL, malformed bodies and a bounded burst of random requests; their statuses."""
    junk = random.Random(11)
    statuses = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for query in ["fetch(", "))))", "reduce(sum, by=[", "x" * 20_000, "fetch('a') | map(nope, 1m)"]:
            statuses.append(client.post("/api/v1/query", json={"query": query}).status_code)
        statuses.append(client.post("/api/v1/query", content=b"\x00\xff{not json").status_code)
        for _ in range(200):
            path = junk.choice(["/api/v1/query", "/api/v1/series", "/api/v1/label/x/values", "/nope"])
            body = bytes(junk.randrange(256) for _ in range(junk.randrange(0, 2000)))
            method = junk.choice(["GET", "POST", "PUT", "DELETE"])
            statuses.append(
                client.request(method, path, content=body, params={"match": body[:50].hex()}).status_code
            )
    return statuses


def test_every_series_and_round_lands_once_with_its_value_through_faults(
    tmp_path: Path, spark: Any, wait: Callable[..., None]
) -> None:
    stack = Stack(tmp_path / "stack", interval=4, apps=2, endpoints=3, variables=40)
    step = stack.interval * 1000
    events_per_round = len(stack.contexts)
    faults: list[str] = []
    with stack:
        first = stack.current_round() + 2 * step
        wait(
            lambda: len(stack.vhms_values(first, first)) == len(stack.expected(first, first)), 90, "round one"
        )

        r = stack.current_round() + step  # the agent killed mid-round, restarted at once
        stack.wait_for_round(r, 0.1)
        stack.kill_agent()
        stack.start_agent()
        faults.append(f"agent SIGKILL in round {r}")

        r = stack.current_round() + 2 * step  # VHMS down for three rounds
        stack.wait_for_round(r, 0.5)
        stack.stop_vhms()
        stack.wait_for_round(r + 3 * step, 0.5)
        stack.start_vhms()
        faults.append(f"VHMS down from round {r} to {r + 3 * step}")

        r = stack.current_round() + step  # ZooKeeper restarted
        stack.wait_for_round(r, 0.3)
        stack.restart_zookeeper()
        faults.append(f"ZooKeeper restarted in round {r}")

        garbage = GarbageEndpoint(stack.zk)  # bad input at every edge, while the rounds go on
        answer = garbage_to_the_flume_source(stack.flume_port)
        statuses = junk_at_the_query_api(stack.api_url)
        wait(lambda: stack.agent_metrics()["SOURCE.poll"]["PollFailCount"] >= 1, 60, "a failed poll of junk")
        garbage.close()

        # the vhms sink at a tenth of the inflow for five rounds
        r = stack.current_round() + step
        stack.wait_for_round(r, 0.2)
        stack.pace_vhms_sink(events_per_round / stack.interval / 10)
        backlog, rss = [], []
        while stack.current_round() < r + 5 * step:
            backlog.append(stack.agent_metrics()["CHANNEL.tovhms"]["ChannelSize"])
            rss.append(stack.running_agent().rss_bytes())
            stack.wait_for_round(stack.current_round(), 1.0)
        stack.pace_vhms_sink(None)
        faults.append(f"vhms sink paced from round {r} for five rounds")

        last = stack.current_round() + step
        wait(
            lambda: len(stack.vhms_values(last, last)) == len(stack.expected(last, last)),
            120,
            "the last round in VHMS",
        )
        for channel in ("tovhms", "toraw"):
            wait(
                lambda channel=channel: stack.agent_metrics()[f"CHANNEL.{channel}"]["ChannelSize"] == 0,
                120,
                f"{channel} to drain",
            )
        polls = {k: v for k, v in stack.agent_metrics()["SOURCE.poll"].items() if k.startswith("Poll")}
        stack.stop_agent()  # cleanly: the raw sink rolls its last landing file
        held = stack.vhms_values(first, last)
    warnings = [
        line for line in stack.agent_config.with_suffix(".log").read_text().splitlines() if "WARNING" in line
    ]

    expected = stack.expected(first, last)
    missing = sorted(set(expected) - set(held))
    wrong = sorted((k, held[k], v) for k, v in expected.items() if k in held and held[k] != v)
    assert not missing and not wrong, (
        f"VHMS: {len(missing)} missing {missing[:5]}, wrong {wrong[:5]}; {faults}; polls {polls}; "
        f"the agent's warnings: {warnings[-20:]}"
    )
    assert max(backlog) >= 2 * events_per_round, backlog  # the channel filled while the sink was slow
    assert max(rss) < RSS_BOUND, rss

    assert answer == b""  # the Flume source closed the connection on junk
    assert all(status < 500 for status in statuses), Counter(statuses)
    assert statuses[:3] == [400, 400, 400] and all(400 <= status < 500 for status in statuses[3:6]), statuses

    landed = sorted(stack.landing().glob("*.avro"))
    assert landed and not list(stack.landing().glob("*.tmp"))
    damaged = stack.landing() / "zz-damaged-copy.avro"  # a replayed file, cut short on disk
    shutil.copy(landed[len(landed) // 2], damaged)
    damaged.write_bytes(damaged.read_bytes()[:-40])
    raw_ingest.ingest_once(
        spark, str(stack.landing()), f"file://{tmp_path}/parquet", str(tmp_path / "checkpoint")
    )
    frame = pd.read_parquet(tmp_path / "parquet", columns=["series", "ts", "value"])
    keys = []
    for series, ts in zip(frame["series"].tolist(), frame["ts"].tolist(), strict=True):
        name, labels = parse_series(series)
        if name == "test.counter":
            keys.append((labels["context"], int(labels["i"]), int(pd.Timestamp(ts).value // 1_000_000)))
        else:
            keys.append(("", -1, 0))
    counts = Counter(key for key in keys if first <= key[2] <= last)
    assert set(counts) == set(expected), f"Parquet: missing {sorted(set(expected) - set(counts))[:5]}"
    assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1][:5]
    values = dict(zip(keys, frame["value"].tolist(), strict=True))
    assert all(values[k] == formula_value(k[1], k[2], step) for k in expected)
