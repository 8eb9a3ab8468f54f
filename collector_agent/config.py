"""The agent configuration: Flume's properties format, parsed and checked before anything
starts.

::

    a1.sources = r1
    a1.channels = c1
    a1.sinks = k1
    a1.channels.c1.type = memory
    a1.sources.r1.type = thrift
    a1.sources.r1.channels = c1
    a1.sources.r1.bind = 0.0.0.0
    a1.sources.r1.port = ${FLUME_PORT}
    a1.sinks.k1.type = logger
    a1.sinks.k1.channel = c1

``${NAME}`` is replaced by the environment variable ``NAME`` (an unset one is an error).
Keys of other agents in the same file are ignored. Every problem raises one
``ConfigurationError`` naming the key: a component used but not listed or listed but not
defined, a missing ``type`` or binding, an unknown type, a bad number,
``batchSize > transactionCapacity``, a sink in two groups.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import javaproperties

from collector_agent.context import Context
from collector_agent.exceptions import ConfigurationError

__all__ = ["AgentSpec", "ComponentSpec", "SinkGroupSpec", "load_properties", "parse_agent"]

_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KINDS = ("sources", "channels", "sinks", "sinkgroups")
_RUNNER_KEYS = ("backoffSleepIncrement", "maxBackoffSleep")
# settings of each (kind, name), as the properties give them
_Components = dict[tuple[str, str], dict[str, str]]


def load_properties(text: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Parse Java properties text and substitute ``${ENV}`` references."""
    env = os.environ if environ is None else environ
    try:
        raw = javaproperties.loads(text)
    except (ValueError, UnicodeError) as exc:
        raise ConfigurationError(f"not a properties file: {exc}") from None
    values = {}
    for key, value in raw.items():

        def substitute(match: re.Match[str], key: str = key) -> str:
            name = match.group(1)
            if name not in env:
                raise ConfigurationError(f"{key}: environment variable ${{{name}}} is not set")
            return env[name]

        values[key.strip()] = _ENV_RE.sub(substitute, value).strip()
    return values


@dataclass(frozen=True)
class ComponentSpec:
    """One source, channel or sink as configured: what a reload compares."""

    kind: str  # "source", "channel", "sink"
    name: str
    type: str
    values: tuple[tuple[str, str], ...]
    prefix: str
    channels: tuple[str, ...] = ()

    @property
    def context(self) -> Context:
        return Context(dict(self.values), self.prefix)


@dataclass(frozen=True)
class SinkGroupSpec:
    name: str
    sinks: tuple[str, ...]
    processor: tuple[tuple[str, str], ...]
    prefix: str

    @property
    def context(self) -> Context:
        return Context(dict(self.processor), self.prefix)


@dataclass
class AgentSpec:
    """A whole agent: components by name, and groups of sinks."""

    name: str
    channels: dict[str, ComponentSpec] = field(default_factory=dict)
    sources: dict[str, ComponentSpec] = field(default_factory=dict)
    sinks: dict[str, ComponentSpec] = field(default_factory=dict)
    sinkgroups: dict[str, SinkGroupSpec] = field(default_factory=dict)


def _split(values: dict[str, str], agent: str) -> tuple[dict[str, list[str]], _Components]:
    prefix = agent + "."
    lists: dict[str, list[str]] = {}
    components: _Components = {}
    for key, value in values.items():
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix) :]
        kind, _, tail = rest.partition(".")
        if kind not in _KINDS:
            raise ConfigurationError(f"{key}: unknown kind {kind!r} (expected one of {', '.join(_KINDS)})")
        if not tail:
            names = value.split()
            if len(set(names)) != len(names):
                raise ConfigurationError(f"{key}: a name is listed twice in {value!r}")
            lists[kind] = names
            continue
        name, _, setting = tail.partition(".")
        if not setting:
            raise ConfigurationError(f"{key}: expected {prefix}{kind}.<name>.<setting>")
        components.setdefault((kind, name), {})[setting] = value
    return lists, components


def parse_agent(values: Mapping[str, str], agent: str) -> AgentSpec:
    """Check the configuration of ``agent`` and return its spec (see the module doc)."""
    lists, components = _split(dict(values), agent)
    if not any(key.startswith(agent + ".") for key in values):
        raise ConfigurationError(f"no configuration for agent {agent!r} (keys start with {agent}.)")
    for (kind, name), _ in components.items():
        if name not in lists.get(kind, []):
            raise ConfigurationError(
                f"{agent}.{kind}.{name}: {name} is configured but not listed in {agent}.{kind}"
            )
    spec = AgentSpec(agent)
    _parse_channels(spec, lists, components)
    _parse_sources(spec, lists, components)
    _parse_sinks(spec, lists, components)
    grouped = _parse_sinkgroups(spec, lists, components)
    _group_the_rest(spec, grouped)
    return spec


def _component(
    agent: str, components: _Components, kind: str, singular: str, name: str
) -> tuple[str, dict[str, str], str]:
    """The type, the other settings and the key prefix of a listed component."""
    prefix = f"{agent}.{kind}.{name}."
    settings = dict(components.get((kind, name), {}))
    if "type" not in settings:
        raise ConfigurationError(f"{prefix}type: is required ({singular} {name} is listed)")
    return settings.pop("type"), settings, prefix


def _parse_channels(spec: AgentSpec, lists: dict[str, list[str]], components: _Components) -> None:
    for name in lists.get("channels", []):
        type_name, settings, prefix = _component(spec.name, components, "channels", "channel", name)
        spec.channels[name] = ComponentSpec(
            "channel", name, type_name, tuple(sorted(settings.items())), prefix
        )
    if not spec.channels:
        raise ConfigurationError(f"{spec.name}.channels: an agent needs at least one channel")


def _parse_sources(spec: AgentSpec, lists: dict[str, list[str]], components: _Components) -> None:
    for name in lists.get("sources", []):
        type_name, settings, prefix = _component(spec.name, components, "sources", "source", name)
        bound = settings.pop("channels", "").split()
        if not bound:
            raise ConfigurationError(f"{prefix}channels: is required (the channels source {name} writes to)")
        for channel in bound:
            if channel not in spec.channels:
                raise ConfigurationError(f"{prefix}channels: channel {channel!r} is not defined")
        spec.sources[name] = ComponentSpec(
            "source", name, type_name, tuple(sorted(settings.items())), prefix, tuple(bound)
        )


def _parse_sinks(spec: AgentSpec, lists: dict[str, list[str]], components: _Components) -> None:
    for name in lists.get("sinks", []):
        type_name, settings, prefix = _component(spec.name, components, "sinks", "sink", name)
        channel = settings.pop("channel", "").strip()
        if not channel:
            raise ConfigurationError(f"{prefix}channel: is required (the channel sink {name} reads)")
        if len(channel.split()) != 1:
            raise ConfigurationError(f"{prefix}channel: a sink reads exactly one channel, got {channel!r}")
        if channel not in spec.channels:
            raise ConfigurationError(f"{prefix}channel: channel {channel!r} is not defined")
        spec.sinks[name] = ComponentSpec(
            "sink", name, type_name, tuple(sorted(settings.items())), prefix, (channel,)
        )


def _parse_sinkgroups(
    spec: AgentSpec, lists: dict[str, list[str]], components: _Components
) -> dict[str, str]:
    """The listed sink groups; returns the group of each sink they hold."""
    grouped: dict[str, str] = {}
    for name in lists.get("sinkgroups", []):
        prefix = f"{spec.name}.sinkgroups.{name}."
        settings = components.get(("sinkgroups", name), {})
        members = settings.get("sinks", "").split()
        if not members:
            raise ConfigurationError(f"{prefix}sinks: is required (the sinks of group {name})")
        for sink in members:
            if sink not in spec.sinks:
                raise ConfigurationError(f"{prefix}sinks: sink {sink!r} is not defined")
            if sink in grouped:
                raise ConfigurationError(
                    f"{prefix}sinks: sink {sink!r} is already in use by group {grouped[sink]}"
                )
            grouped[sink] = name
        processor = {k[len("processor.") :]: v for k, v in settings.items() if k.startswith("processor.")}
        processor.setdefault("type", "default")
        for key in settings:
            if key != "sinks" and not key.startswith("processor."):
                raise ConfigurationError(f"{prefix}{key}: unknown sink group setting")
        spec.sinkgroups[name] = SinkGroupSpec(
            name, tuple(members), tuple(sorted(processor.items())), prefix + "processor."
        )
    return grouped


def _group_the_rest(spec: AgentSpec, grouped: dict[str, str]) -> None:
    """A group of its own for every sink in none, named with a space so it cannot clash with
    a listed group; the sink's own runner backoff keys become the group's."""
    for sink, sink_spec in spec.sinks.items():
        if sink not in grouped:
            runner_keys = {k: v for k, v in sink_spec.values if k in _RUNNER_KEYS}
            spec.sinkgroups[f"sink {sink}"] = SinkGroupSpec(
                f"sink {sink}",
                (sink,),
                tuple(sorted({"type": "default", **runner_keys}.items())),
                f"{spec.name}.sinks.{sink}.",
            )
