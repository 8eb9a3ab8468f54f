"""The supervisor of ``artimon up`` and the test stack: start in order, stop in reverse, a
failed start stops what had started; and the one builder of agent properties, read back by
the agent's own parser."""

from __future__ import annotations

import pytest

from artimon.stack import State, Supervisor, agent_properties, kafka_agents, up_agent
from collector_agent import load_properties, parse_agent


class Part:
    """A component that writes what happens to it in a shared journal."""

    def __init__(
        self, name: str, journal: list[str], *, fails: bool = False, says: str | None = None
    ) -> None:
        self.name = name
        self.journal = journal
        self.fails = fails
        self.says = says

    def start(self) -> None:
        self.journal.append(f"start {self.name}")
        if self.fails:
            raise RuntimeError(f"{self.name} cannot start")

    def ready_lines(self) -> list[str]:
        return [f"[ready] {self.name}"]

    def stop(self) -> str | None:
        self.journal.append(f"stop {self.name}")
        return self.says


def test_components_start_in_order_and_stop_in_reverse_saying_their_lines() -> None:
    journal: list[str] = []
    said: list[str] = []
    parts = [Part("zookeeper", journal), Part("vhms", journal, says="vhms: snapshot"), Part("agent", journal)]
    supervisor = Supervisor(parts, say=said.append)
    assert supervisor.state is State.NEW
    with supervisor:
        assert supervisor.state is State.RUNNING
        assert said == ["[ready] zookeeper", "[ready] vhms", "[ready] agent"]
    assert supervisor.state is State.STOPPED
    assert journal == [
        *("start zookeeper", "start vhms", "start agent"),
        *("stop agent", "stop vhms", "stop zookeeper"),
    ]
    assert said[-1] == "vhms: snapshot"
    supervisor.stop()  # a second stop does nothing
    assert journal[-1] == "stop zookeeper" and len(journal) == 6


def test_a_failed_start_stops_what_started_in_reverse_and_raises() -> None:
    journal: list[str] = []
    said: list[str] = []
    parts = [Part("zookeeper", journal), Part("vhms", journal, fails=True), Part("agent", journal)]
    supervisor = Supervisor(parts, say=said.append)
    with pytest.raises(RuntimeError, match="vhms cannot start"):
        supervisor.start()
    assert supervisor.state is State.FAILED
    assert journal == ["start zookeeper", "start vhms", "stop vhms", "stop zookeeper"]  # agent never started
    assert said == ["[ready] zookeeper"]
    with pytest.raises(RuntimeError, match="starts once"):
        supervisor.start()


def test_a_stop_that_fails_does_not_keep_the_others_running() -> None:
    journal: list[str] = []

    class Stubborn(Part):
        def stop(self) -> str | None:
            super().stop()
            raise OSError("still busy")

    supervisor = Supervisor([Part("zookeeper", journal), Stubborn("agent", journal)], say=lambda line: None)
    supervisor.start()
    with pytest.raises(OSError, match="still busy"):
        supervisor.stop()
    assert journal[-2:] == ["stop agent", "stop zookeeper"]


def test_the_builder_writes_what_the_agent_parser_reads() -> None:
    text = agent_properties(
        "a",
        sources={"r1": {"type": "seq", "totalEvents": 5, "channels": ["c1", "c2"]}},
        channels={"c1": {"type": "memory"}, "c2": {"type": "memory", "capacity": 10}},
        sinks={"k1": {"type": "null", "channel": "c1"}, "k2": {"type": "null", "channel": "c2"}},
        sinkgroups={"g": {"sinks": "k1", "processor.type": "failover"}},
        comment="two lines\nof comment",
    )
    assert text.startswith("# two lines\n# of comment\na.sources = r1\na.channels = c1 c2\na.sinks = k1 k2\n")
    spec = parse_agent(load_properties(text), "a")
    assert spec.sources["r1"].channels == ("c1", "c2")
    assert dict(spec.channels["c2"].values)["capacity"] == "10"
    assert spec.sinkgroups["g"].sinks == ("k1",)


def test_the_agents_of_up_parse() -> None:
    environ = {
        name: "1"
        for name in (
            *("ARTIMON_ZK", "ARTIMON_INTERVAL", "ARTIMON_ROLL_INTERVAL", "ARTIMON_THRIFT_PORT"),
            *("ARTIMON_HOST", "ARTIMON_DATA_DIR", "ARTIMON_KAFKA"),
            *("ARTIMON_API_METRICS", "ARTIMON_VHMS_METRICS", "ARTIMON_AGENT_METRICS"),
            *("ARTIMON_SELF_CA", "ARTIMON_SELF_USER", "ARTIMON_SELF_PASSWORD_FILE"),
        )
    }
    assert set(parse_agent(load_properties(up_agent(), environ), "up").sinks) == {"store", "land"}
    both = load_properties(kafka_agents(), environ)
    assert set(parse_agent(both, "up").sinks) == {"publish"}
    assert set(parse_agent(both, "store").sources) == {"samples", "api", "vhms", "agent"}
