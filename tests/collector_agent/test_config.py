from __future__ import annotations

import pytest

from collector_agent import Agent, ConfigurationError, load_properties, parse_agent

BASE = """
a1.sources = r1
a1.channels = c1
a1.sinks = k1
a1.sources.r1.type = seq
a1.sources.r1.channels = c1
a1.channels.c1.type = memory
a1.sinks.k1.type = null
a1.sinks.k1.channel = c1
"""


def agent(extra: str = "", base: str = BASE, environ: dict[str, str] | None = None) -> Agent:
    return Agent.from_properties(base + extra, "a1", environ or {})


def test_a_good_configuration_parses_as_flume_users_write_it() -> None:
    spec = parse_agent(load_properties(BASE + "b2.sources = ignored\n"), "a1")
    assert list(spec.sources) == ["r1"] and spec.sources["r1"].channels == ("c1",)
    assert spec.sinks["k1"].channels == ("c1",)
    assert list(spec.sinkgroups) == ["sink k1"]  # an ungrouped sink runs in a group of its own


def test_env_substitution() -> None:
    values = load_properties("a1.sources.r1.port = ${PORT}\n", {"PORT": "4141"})
    assert values["a1.sources.r1.port"] == "4141"
    with pytest.raises(ConfigurationError, match=r"a1\.sources\.r1\.port: environment variable \$\{NOPE\}"):
        load_properties("a1.sources.r1.port = ${NOPE}\n", {})


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # unknown type
        ("a1.channels.c1.type = quantum\n", r"a1\.channels\.c1\.type: unknown channel type 'quantum'"),
        ("a1.sinks.k1.type = no.such.module:Sink\n", r"a1\.sinks\.k1\.type: sink type .* cannot be loaded"),
        # missing bindings
        ("a1.sources.r1.channels =\n", r"a1\.sources\.r1\.channels: is required"),
        ("a1.sinks.k1.channel =\n", r"a1\.sinks\.k1\.channel: is required"),
        ("a1.sinks.k1.channel = c9\n", r"a1\.sinks\.k1\.channel: channel 'c9' is not defined"),
        ("a1.sources.r1.channels = c1 c9\n", r"a1\.sources\.r1\.channels: channel 'c9' is not defined"),
        ("a1.sinks.k1.channel = c1 c1\n", r"a1\.sinks\.k1\.channel: a sink reads exactly one channel"),
        # batchSize > transactionCapacity
        ("a1.sinks.k1.batchSize = 500\n", r"a1\.sinks\.k1\.batchSize: 500 exceeds transactionCapacity 100"),
        ("a1.sources.r1.batchSize = 101\n", r"a1\.sources\.r1\.batchSize: 101 exceeds transactionCapacity"),
        # bad numbers
        ("a1.channels.c1.capacity = lots\n", r"a1\.channels\.c1\.capacity: 'lots' is not an integer"),
        ("a1.channels.c1.capacity = 0\n", r"a1\.channels\.c1\.capacity: 0 is below the minimum 1"),
        ("a1.channels.c1.keep-alive = soon\n", r"a1\.channels\.c1\.keep-alive: 'soon' is not a number"),
        ("a1.channels.c1.transactionCapacity = 1000\n", r"transactionCapacity: 1000 exceeds capacity 100"),
        ("a1.sinks.k1.deadLetter.maxAttempts = -1\n", r"a1\.sinks\.k1\.deadLetter\.maxAttempts: -1 is below"),
        # listed and defined must agree
        (
            "a1.channels.c2.type = memory\n",
            r"a1\.channels\.c2: c2 is configured but not listed in a1\.channels",
        ),
        ("a1.frobs = x\n", r"a1\.frobs: unknown kind 'frobs'"),
        # selectors, interceptors, groups
        ("a1.sources.r1.selector.type = psychic\n", r"a1\.sources\.r1\.selector\.type: unknown selector"),
        ("a1.sources.r1.interceptors = i1\n", r"a1\.sources\.r1\.interceptors\.i1\.type: is required"),
        (
            "a1.sinkgroups = g1\na1.sinkgroups.g1.sinks = k1\na1.sinkgroups.g1.processor.type = failover\n"
            "a1.sinkgroups.g2.sinks = k1\n",
            r"a1\.sinkgroups\.g2: g2 is configured but not listed",
        ),
        (
            "a1.sinkgroups = g1 g2\na1.sinkgroups.g1.sinks = k1\na1.sinkgroups.g2.sinks = k1\n",
            r"a1\.sinkgroups\.g2\.sinks: sink 'k1' is already in use by group g1",
        ),
        (
            "a1.sinkgroups = g1\na1.sinkgroups.g1.sinks = k1\n"
            "a1.sinkgroups.g1.processor.type = load_balance\n",
            r"a1\.sinkgroups\.g1\.processor\.type: LoadBalancingSinkProcessor needs at least 2 sinks",
        ),
        (
            "a1.sinkgroups = g1\na1.sinkgroups.g1.sinks = k1\na1.sinkgroups.g1.procesor.type = failover\n",
            r"a1\.sinkgroups\.g1\.procesor\.type: unknown sink group setting",
        ),
    ],
)
def test_each_class_of_error_names_its_key(extra: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        agent(extra)


def test_missing_type_and_missing_agent() -> None:
    with pytest.raises(ConfigurationError, match=r"a1\.sinks\.k2\.type: is required"):
        agent("a1.sinks = k1 k2\na1.sinks.k2.channel = c1\n")
    with pytest.raises(ConfigurationError, match="no configuration for agent 'a1'"):
        agent(base="b1.channels = c1\n")
    with pytest.raises(ConfigurationError, match=r"a1\.channels: an agent needs at least one channel"):
        agent(base="a1.sources = \n")


def test_nothing_starts_half_configured() -> None:
    # the thrift source is checked (its port) before anything binds or starts
    with pytest.raises(ConfigurationError, match=r"a1\.sources\.r2\.port: is required"):
        agent(
            "a1.sources = r1 r2\na1.sources.r2.type = thrift\na1.sources.r2.bind = 127.0.0.1\n"
            "a1.sources.r2.channels = c1\n"
        )


def test_unknown_keys_of_known_components_are_named_with_the_closest_known_one(tmp_path) -> None:
    """A typo (``dataDir`` for ``dataDirs``) must not pass silently, and what every
    component knows (its own keys, the runner's, the builder's) raises no warning."""
    typos = agent(
        f"a1.channels.c1.type = file\na1.channels.c1.dataDir = {tmp_path}\n"
        "a1.sources.r1.totalEvent = 5\na1.sinks.k1.batchsize = 10\na1.sinks.k1.zzz = 1\n"
    )
    assert typos.warnings == [
        "a1.channels.c1.dataDir is not a known key, ignored; did you mean a1.channels.c1.dataDirs?",
        "a1.sources.r1.totalEvent is not a known key, ignored; did you mean a1.sources.r1.totalEvents?",
        "a1.sinks.k1.batchsize is not a known key, ignored; did you mean a1.sinks.k1.batchSize?",
        "a1.sinks.k1.zzz is not a known key, ignored",
    ]
    clean = agent(
        "a1.sources.r1.totalEvents = 5\na1.sources.r1.selector.type = replicating\n"
        "a1.sinks.k1.batchSize = 10\na1.sinks.k1.maxBackoffSleep = 100\na1.channels.c1.capacity = 1000\n"
    )
    assert clean.warnings == []
