"""A ``prometheus_remote_write`` source whose samples land twice, as in production: a vhms
sink into a real VHMS (queried by PromQL through the query API) and a raw sink whose landing
files Spark's ``raw_ingest`` turns into the Parquet history. The OTLP and remote-write 2.0
tests count their samples once in each (the ``history`` fixture of conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq

from artimon.stack import agent_properties
from bookkeeper.ground import BackgroundServer
from collector_agent import Agent
from query_dsl import create_app
from vhms import LocalClient
from vhms.server import Store, VhmsService


@dataclass
class HistoryStack:
    vhms: VhmsService
    agent: Agent
    api: BackgroundServer
    landing: Path

    @property
    def url(self) -> str:
        """Where remote write (1.0 and 2.0) is sent."""
        return self.agent.sources["rw"].url  # type: ignore[attr-defined,no-any-return]

    @property
    def otlp_url(self) -> str:
        source = self.agent.sources["rw"]
        return f"http://127.0.0.1:{source.port}/api/v1/otlp/v1/metrics"  # type: ignore[attr-defined]

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api.port}"

    def counter(self, name: str) -> float:
        return self.agent.sources["rw"].metrics()[name]

    def query(self, expression: str) -> list[dict[str, Any]]:
        answer = httpx.get(
            f"{self.api_url}/prometheus/api/v1/query", params={"query": expression}, timeout=30
        )
        assert answer.status_code == 200, answer.text
        return answer.json()["data"]["result"]  # type: ignore[no-any-return]

    def parquet_rows(self, spark: Any, scratch: Path, wait: Callable[..., None]) -> list[dict[str, Any]]:
        """The ``series`` and ``ts`` (epoch ms) of every row of the Parquet history ``raw_ingest`` makes
        (under ``scratch``) of the landing files, once the raw sink has written and rolled
        every sample batch the source put in its channel."""
        from spark_jobs import raw_ingest  # pyspark's import is slow: only here

        put = self.agent.channels["land"].metrics
        sink = self.agent.sinks["raw"].metrics

        def landed() -> bool:
            drained = sink()["EventDrainSuccessCount"] == put()["EventPutSuccessCount"]
            return drained and sink()["FilesRolledCount"] >= 1 and not list(self.landing.glob("*.tmp"))

        wait(landed, timeout=60, what="every sample batch in a rolled landing file")
        raw_ingest.ingest_once(
            spark, self.landing.as_uri(), (scratch / "parquet").as_uri(), (scratch / "ck").as_uri()
        )
        table = pq.read_table(scratch / "parquet", columns=["series", "ts"])
        ts_ms = table["ts"].cast(pa.timestamp("ms")).cast(pa.int64())
        return table.set_column(1, "ts", ts_ms).to_pylist()  # type: ignore[no-any-return]


def start_history_stack(landing: Path) -> HistoryStack:
    """The source (default limits) into a ``1s:120`` VHMS and ``landing``; the API on a free port."""
    store = Store("1s:120")
    service = VhmsService(store, http_port=None, snapshot_dir=None, wal=False)
    service.start(register=False)
    receiver = {"type": "prometheus_remote_write", "bind": "127.0.0.1", "port": 0, "channels": "ch land"}
    sink = {
        "type": "vhms",
        "channel": "ch",
        "servers": f"default@127.0.0.1:{service.port}",
        "time": "sample",
        "timeout": 10,
        "batchSize": 10,
        "maxBackoffSleep": 100,
    }
    properties = agent_properties(
        "a",
        sources={"rw": receiver},
        channels={
            "ch": {"type": "memory", "capacity": 100, "keep-alive": 0},
            "land": {"type": "memory", "capacity": 100, "keep-alive": 0},
        },
        sinks={
            "out": sink,
            "raw": {"type": "raw", "channel": "land", "directory": str(landing), "rollInterval": 0.5},
        },
    )
    agent = Agent.from_properties(properties, "a", {})
    agent.start()
    api = BackgroundServer(create_app(LocalClient(store)), "127.0.0.1", 0)
    api.start()
    return HistoryStack(service, agent, api, landing)


def stop_history_stack(stack: HistoryStack) -> None:
    stack.api.stop()
    stack.agent.stop()
    stack.vhms.stop()
