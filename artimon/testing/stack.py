"""The test stack (see the package doc): :class:`Stack`, its components under the
supervisor of ``artimon up``, its faults and its accounting."""

from __future__ import annotations

import logging
import math
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from artimon.servers import ZooKeeperServer, free_port
from artimon.stack import Component, Supervisor, ZooKeeper, agent_properties
from artimon.testing.processes import AgentProcess, Process, StackProcess
from bookkeeper.testing import AppProcess, formula_value, start_app
from bookkeeper.wire import parse_series
from vhms import VhmsClient

__all__ = ["Stack"]


class _Apps:
    """The applications, each ``python -m bookkeeper.testing --aligned``."""

    name = "applications"

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.running: list[AppProcess] = []

    def start(self) -> None:
        stack = self.stack
        for k in range(stack.apps):
            self.running.append(
                start_app(
                    f"acct{k}",
                    stack.zk,
                    variables=stack.variables,
                    endpoints=stack.endpoints,
                    aligned=stack.interval,
                )
            )

    def ready_lines(self) -> list[str]:
        return [f"{len(self.running)} applications serving"]

    def stop(self) -> None:
        for app in self.running:
            app.kill(signal.SIGTERM)


def _running(process: StackProcess | None, what: str) -> StackProcess:
    if process is None:
        raise RuntimeError(f"{what} is not running")
    return process


@dataclass
class Stack:
    """See the module doc. ``apps`` application processes each serve ``endpoints``
    contexts of ``variables`` counters; rounds are ``interval`` seconds, and VHMS's ring of
    rounds holds ``ring_seconds`` (its memory: a chunk of 65,536 series per bucket)."""

    root: Path
    interval: int = 4
    apps: int = 2
    endpoints: int = 3
    variables: int = 50
    ring_seconds: int = 3600
    zookeeper: ZooKeeperServer = field(init=False)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "agent").mkdir(exist_ok=True)
        self.zookeeper = ZooKeeperServer(self.root / "zookeeper", tick_time_ms=500)
        self.zk = f"{self.zookeeper.hosts}/artimon"
        self.flume_port = free_port()
        self.monitor_port = free_port()
        self.vhms_port = free_port()  # started again as itself: the same member, not a new one
        self.agent_config = self.root / "agent" / "agent.properties"
        self.agent_config.write_text(self._agent_properties(None))
        self._vhms = Process("vhms", self._vhms_command, self.root / "vhms.log", "serving")
        self._agent = AgentProcess(self.agent_config, self.monitor_port)
        self._apps = _Apps(self)
        self._api = Process(
            "query api",
            lambda: [sys.executable, "-m", "artimon", "api", "--port", "0", "--zk", self.zk],
            self.root / "api.log",
            "query API on",
        )
        components: list[Component] = [
            ZooKeeper(self.zookeeper),
            self._vhms,
            self._apps,
            self._agent,
            self._api,
        ]
        self.supervisor = Supervisor(components, say=logging.getLogger(__name__).info)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Stack:
        """Start every component; if one fails, stop those already started and raise."""
        self.supervisor.start()
        return self

    def stop(self) -> None:
        """Stop everything in reverse order (the agent with SIGTERM: channels closed, landing
        files rolled)."""
        self.supervisor.stop()

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def vhms(self) -> StackProcess | None:
        return self._vhms.running

    @property
    def agent(self) -> StackProcess | None:
        return self._agent.running

    @property
    def api(self) -> StackProcess | None:
        return self._api.running

    @property
    def applications(self) -> list[AppProcess]:
        return self._apps.running

    @property
    def contexts(self) -> list[str]:
        return [f"acct{k}-{n}" for k in range(self.apps) for n in range(self.endpoints)]

    @property
    def api_url(self) -> str:
        return _running(self.api, "the query API").ready_line.split(" on ", 1)[1].split(" ", 1)[0]

    # -- components and faults --------------------------------------------------------------

    def _agent_properties(self, pace: float | None) -> str:
        events = self.apps * self.endpoints  # one per context and round
        dead_letter = self.root / "agent" / "dead-letter"
        timeout = max(1, self.interval // 2)

        def file_channel(name: str) -> dict[str, object]:
            return {
                "type": "file",
                "dataDirs": self.root / "agent" / name,
                "capacity": events * 1000,
                "transactionCapacity": 100,
                "minimumRequiredSpace": 16777216,
                "deadLetter.dir": dead_letter,
            }

        store: dict[str, object] = {
            **{"type": "vhms", "channel": "tovhms", "zk": self.zk, "shardGrace": 300, "timeout": 5},
            **{"batchSize": max(1, events), "maxBackoffSleep": 500, "deadLetter.dir": dead_letter},
        }
        if pace is not None:
            store.update(batchSize=1, maxEventsPerSecond=pace)
        return agent_properties(
            "a",
            sources={
                "poll": {
                    **{"type": "artimon", "zk": self.zk, "interval": self.interval, "agentId": "accounting"},
                    **{"catchup": 0.8, "readTimeout": timeout, "connectTimeout": timeout},
                    "channels": ["tovhms", "toraw"],
                },
                "flume": {
                    "type": "thrift",
                    "bind": "127.0.0.1",
                    "port": self.flume_port,
                    "channels": "flume",
                },
            },
            channels={
                "tovhms": file_channel("tovhms"),
                "toraw": file_channel("toraw"),
                "flume": {"type": "memory"},
            },
            sinks={
                "store": store,
                "land": {
                    **{"type": "raw", "channel": "toraw", "directory": self.landing()},
                    **{"rollInterval": self.interval, "deadLetter.dir": dead_letter},
                },
                "drop": {"type": "null", "channel": "flume"},
            },
        )

    def start_agent(self) -> None:
        self._agent.start()

    def running_agent(self) -> StackProcess:
        return _running(self.agent, "the agent")

    def stop_agent(self) -> None:
        """SIGTERM: the agent stops its sources, then drains nothing more and closes its
        channels; the raw sink rolls its landing file."""
        _running(self.agent, "the agent")
        self._agent.stop()

    def kill_agent(self) -> None:
        """SIGKILL: no shutdown at all, as a crash or the OOM killer does."""
        _running(self.agent, "the agent")
        self._agent.stop(signal.SIGKILL)

    def agent_metrics(self) -> dict[str, dict[str, float]]:
        response = httpx.get(f"http://127.0.0.1:{self.monitor_port}/metrics", timeout=10)
        response.raise_for_status()
        metrics: dict[str, dict[str, float]] = response.json()
        return metrics

    def pace_vhms_sink(self, events_per_second: float | None) -> None:
        """Make the vhms sink deliver at most ``events_per_second`` (``None``: no limit); the
        agent reloads the changed sink within a second, its channel kept."""
        self.agent_config.write_text(self._agent_properties(events_per_second))

    def _vhms_command(self) -> list[str]:
        return [
            *(
                sys.executable,
                "-m",
                "artimon",
                "vhms",
                "--zk",
                self.zk,
                "--port",
                str(self.vhms_port),
                "--data-dir",
                str(self.root / "vhms"),
            ),
            *("--resolutions", f"{self.interval}s:{self.ring_seconds // self.interval}"),
        ]

    def start_vhms(self) -> None:
        self._vhms.start()

    def stop_vhms(self) -> None:
        """SIGTERM: VHMS writes a last snapshot and leaves ZooKeeper."""
        _running(self.vhms, "VHMS")
        self._vhms.stop()

    def kill_vhms(self) -> None:
        """SIGKILL: no snapshot; its registration stays in ZooKeeper until its session expires."""
        _running(self.vhms, "VHMS")
        self._vhms.stop(signal.SIGKILL)

    def restart_zookeeper(self, down: float = 2.0) -> None:
        """Stop ZooKeeper, keep it down ``down`` seconds (shorter than the sessions), start it
        again on the same port and data."""
        self.zookeeper.stop()
        time.sleep(down)  # the outage itself, not a wait for an outcome
        self.zookeeper.start()

    # -- rounds and accounting --------------------------------------------------------------

    def current_round(self) -> int:
        interval_ms = self.interval * 1000
        return int(time.time() * 1000) // interval_ms * interval_ms

    def wait_for_round(self, round_ms: int, fraction: float = 0.0) -> None:
        """Sleep until ``fraction`` of the interval into round ``round_ms`` (a schedule, not a
        wait for an outcome)."""
        time.sleep(max(0.0, (round_ms + self.interval * 1000 * fraction) / 1000 - time.time()))

    @property
    def vhms_address(self) -> tuple[str, int]:
        """Where the running VHMS serves Thrift (as it registers in ZooKeeper)."""
        address = _running(self.vhms, "VHMS").ready_line.split(" on ", 1)[1].split(",", 1)[0]
        host, _, port = address.rpartition(":")
        return host, int(port.split()[0])

    def vhms_client(self) -> VhmsClient:
        return VhmsClient(*self.vhms_address, timeout=30)

    def vhms_values(self, first: int, last: int) -> dict[tuple[str, int, int], float]:
        """What VHMS holds for ``test.counter``: (context, i, round) -> value, rounds
        ``first`` to ``last`` included; gaps are absent."""
        with self.vhms_client() as client:
            result = client.fetch("test.counter", first, last + self.interval * 1000, self.interval)
        held: dict[tuple[str, int, int], float] = {}
        for key, row in zip(result.keys, result.values, strict=True):
            _, labels = parse_series(key)
            for stamp, value in zip(result.timestamps.tolist(), row.tolist(), strict=True):
                if first <= stamp <= last and not math.isnan(value):
                    held[(labels["context"], int(labels["i"]), int(stamp))] = value
        return held

    def expected(self, first: int, last: int) -> dict[tuple[str, int, int], int]:
        """(context, i, round) -> the value every round from ``first`` to ``last`` must hold."""
        step = self.interval * 1000
        return {
            (context, i, r): formula_value(i, r, step)
            for r in range(first, last + 1, step)
            for context in self.contexts
            for i in range(self.variables)
        }

    def landing(self) -> Path:
        return self.root / "landing"
