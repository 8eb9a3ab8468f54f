"""A component ``type`` must name a class of its kind, checked before anything is called;
a configuration from ZooKeeper may name registered aliases only."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from kazoo.client import KazooClient

from bookkeeper import resolve_zk
from collector_agent import Agent, ConfigFollower, ConfigStore, ConfigTarget, ConfigurationError

BASE = """
a1.sources = r1
a1.channels = c1
a1.sinks = k1
a1.sources.r1.type = seq
a1.sources.r1.totalEvents = 0
a1.sources.r1.channels = c1
a1.channels.c1.type = memory
a1.sinks.k1.type = null
a1.sinks.k1.channel = c1
"""

# Every callable in it records its call: a refusal "before any call" leaves CALLS empty.
TRAP = """
from collector_agent.sources.seq import SequenceSource

CALLS = []


def trap(*args, **kwargs):
    CALLS.append(("trap", args))


class NotAComponent:
    def __init__(self, *args):
        CALLS.append(("NotAComponent", args))


class CustomSource(SequenceSource):
    def __init__(self, name):
        CALLS.append(("CustomSource", name))
        super().__init__(name)
"""


@pytest.fixture
def trapmod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    (tmp_path / "artimon_trapmod.py").write_text(TRAP)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("artimon_trapmod")
    yield module
    sys.modules.pop("artimon_trapmod", None)


def with_type(key: str, value: str, extra: str = "") -> str:
    lines = [line for line in BASE.splitlines() if not line.startswith(f"{key} =")]
    return "\n".join([*lines, f"{key} = {value}", extra]) + "\n"


REFUSED = [
    # (key, type, what the message must say)
    (
        "a1.sources.r1.type",
        "os:abort",
        r"a1\.sources\.r1\.type: source type 'os:abort' is os:abort, a builtin",
    ),
    ("a1.sinks.k1.type", "builtins:exit", r"a1\.sinks\.k1\.type: sink type 'builtins:exit' .*not a class"),
    ("a1.sinks.k1.type", "os.abort", r"sink type 'os\.abort' is os:abort, a builtin.*not a class"),
    (
        "a1.channels.c1.type",
        "artimon_trapmod:trap",
        r"channel type 'artimon_trapmod:trap' .* a function, not a class",
    ),
    (
        "a1.sinks.k1.type",
        "collector_agent.channels.memory:MemoryChannel",
        r"a1\.sinks\.k1\.type: sink type .* is the class collector_agent\.channels\.memory\.MemoryChannel, "
        r"which is not a Sink; a sink type must be a subclass of collector_agent\.sinks\.base\.Sink",
    ),
    ("a1.sources.r1.type", "artimon_trapmod:NotAComponent", r"NotAComponent, which is not a Source"),
    ("a1.sources.r1.type", "builtins:object", r"builtins\.object, which is not a Source"),
]


@pytest.mark.parametrize(("key", "type_name", "message"), REFUSED)
def test_a_type_that_is_no_class_of_its_kind_is_refused_before_any_call(
    trapmod: ModuleType, key: str, type_name: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Agent.from_properties(with_type(key, type_name), "a1", {})
    assert trapmod.CALLS == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # the kinds that are constructed with no argument: selector, interceptor, processor
        (
            "a1.sources.r1.selector.type = os:abort\n",
            r"a1\.sources\.r1\.selector\.type: selector type 'os:abort'",
        ),
        (
            "a1.sources.r1.interceptors = i1\na1.sources.r1.interceptors.i1.type = builtins:exit\n",
            r"a1\.sources\.r1\.interceptors\.i1\.type: interceptor type 'builtins:exit' .*not a class",
        ),
        (
            "a1.sinkgroups = g1\na1.sinkgroups.g1.sinks = k1\n"
            "a1.sinkgroups.g1.processor.type = artimon_trapmod:trap\n",
            r"a1\.sinkgroups\.g1\.processor\.type: processor type 'artimon_trapmod:trap' .* a function",
        ),
        (
            "a1.sources.r1.selector.type = artimon_trapmod:NotAComponent\n",
            r"NotAComponent, which is not a ChannelSelector; a selector type must be a subclass of "
            r"collector_agent\.selectors\.base\.ChannelSelector",
        ),
        (
            "a1.sources.r1.interceptors = i1\na1.sources.r1.interceptors.i1.type = null\n",
            r"interceptor type 'null'",  # an alias of another kind is no alias of this one
        ),
    ],
)
def test_selectors_interceptors_and_processors_are_checked_too(
    trapmod: ModuleType, extra: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Agent.from_properties(BASE + extra, "a1", {})
    assert trapmod.CALLS == []


def test_a_local_file_may_name_a_class_of_the_right_kind(trapmod: ModuleType) -> None:
    agent = Agent.from_properties(with_type("a1.sources.r1.type", "artimon_trapmod:CustomSource"), "a1", {})
    assert trapmod.CALLS == [("CustomSource", "r1")]
    agent.start()
    try:
        assert type(agent.sources["r1"]).__name__ == "CustomSource"
    finally:
        agent.stop()


def test_a_remote_configuration_may_name_aliases_only(trapmod: ModuleType) -> None:
    agent = Agent.from_properties(BASE, "a1", {})
    agent.start()
    try:
        custom = with_type("a1.sources.r1.type", "artimon_trapmod:CustomSource")
        assert agent.reload(custom, {}, allow_classes=False) is False
        assert trapmod.CALLS == [] and agent.reload_failures == 1
        for key, type_name, _ in REFUSED:
            assert agent.reload(with_type(key, type_name), {}, allow_classes=False) is False
        assert trapmod.CALLS == []
        # aliases are fine remotely, and the command line may allow more
        assert agent.reload(with_type("a1.sinks.k1.type", "logger"), {}, allow_classes=False) is True
        assert agent.reload(custom, {}, allow_classes=True) is True
        assert trapmod.CALLS == [("CustomSource", "r1")]
    finally:
        agent.stop()


def test_the_remote_refusal_names_the_alias_rule(
    trapmod: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    agent = Agent.from_properties(BASE, "a1", {})
    agent.start()
    try:
        with caplog.at_level(logging.ERROR, logger="collector_agent.agent"):
            assert not agent.reload(with_type("a1.sources.r1.type", "os:abort"), {}, allow_classes=False)
        assert (
            "a1.sources.r1.type: source type 'os:abort' is not a registered alias, and this "
            "configuration (from ZooKeeper) may name aliases only (known: artimon, artimon_file, avro, jmx, "
            "kafka, org.apache.flume.source.kafka.KafkaSource, prometheus, prometheus_remote_write, seq, "
            "thrift)"
        ) in caplog.text
        assert "--allow-remote-classes" in caplog.text
    finally:
        agent.stop()


@pytest.mark.parametrize("allow", [False, True])
def test_a_config_znode_naming_a_class_is_refused_unless_the_command_line_allows_it(
    zk_hosts: str, trapmod: ModuleType, wait: Callable[..., None], allow: bool
) -> None:
    agent = Agent.from_properties(BASE, "a1", {})
    agent.start()
    follower = ConfigFollower(agent, zk_hosts, allow_remote_classes=allow)
    follower.start()
    connect, layout = resolve_zk(zk_hosts)
    client = KazooClient(hosts=connect)
    client.start(timeout=30)
    store, target = ConfigStore(client, layout, None), ConfigTarget("agent", "a1")
    try:
        store.write(target, with_type("a1.sinks.k1.type", "os:abort"))
        wait(lambda: agent.reload_failures == 1, what="the refusal of os:abort from the znode")
        store.write(target, with_type("a1.sources.r1.type", "artimon_trapmod:CustomSource"))
        if allow:
            wait(lambda: agent.reloads == 1, what="the reload with a class allowed by the command line")
            assert trapmod.CALLS == [("CustomSource", "r1")]
        else:
            wait(lambda: agent.reload_failures == 2, what="the refusal of a class from the znode")
            assert trapmod.CALLS == [] and agent.reloads == 0
        store.write(target, with_type("a1.sinks.k1.type", "logger"))
        wait(lambda: agent.reloads == (2 if allow else 1), what="an alias from the znode applied")
    finally:
        client.stop()
        client.close()
        follower.stop()
        agent.stop()
