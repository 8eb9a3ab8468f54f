"""Component types by alias, as Flume resolves them (``ChannelType``, ``SourceType``...).

A ``type`` value is an alias from these tables, else a ``module:Class`` (or
``module.Class``) path to load. Whatever it names must be a class that subclasses its
kind's base (:data:`BASES`: a sink type a ``Sink``, a selector type a ``ChannelSelector``...),
checked before anything is called, so ``type = os:abort`` or ``builtins:exit`` is refused
instead of run. A configuration that did not come from a local file (``allow_classes``
false: the znode ``/config/agents/<agent>``) may name registered aliases only: loading a
module runs its code, and a znode is not the operator's file. Every refusal raises
``ConfigurationError`` naming the key, the type as written and the class it resolved to.
"""

from __future__ import annotations

import importlib
from typing import Any

from collector_agent.channels.base import BasicChannel
from collector_agent.exceptions import ConfigurationError
from collector_agent.interceptors.base import Interceptor
from collector_agent.selectors.base import ChannelSelector
from collector_agent.sink_processors.base import SinkProcessor
from collector_agent.sinks.base import Sink
from collector_agent.sources.base import Source

__all__ = ["BASES", "REGISTRY", "register", "resolve"]

BASES: dict[str, type] = {
    "source": Source,
    "channel": BasicChannel,
    "sink": Sink,
    "processor": SinkProcessor,
    "selector": ChannelSelector,
    "interceptor": Interceptor,
}

REGISTRY: dict[str, dict[str, str]] = {
    "source": {
        "seq": "collector_agent.sources.seq:SequenceSource",
        "thrift": "collector_agent.sources.thrift:ThriftSource",
        "avro": "collector_agent.sources.avro:AvroSource",
        "artimon_file": "collector_agent.sources.artimon_file:ArtimonFileSource",
        "artimon": "collector_agent.sources.artimon:ArtimonSource",
        "prometheus_remote_write": "collector_agent.sources.prometheus_remote_write:RemoteWriteSource",
        "prometheus": "collector_agent.sources.prometheus:PrometheusSource",
        "jmx": "collector_agent.sources.jmx:JmxSource",
        "kafka": "collector_agent.sources.kafka:KafkaSource",
        "org.apache.flume.source.kafka.KafkaSource": "collector_agent.sources.kafka:KafkaSource",
    },
    "channel": {
        "memory": "collector_agent.channels.memory:MemoryChannel",
        "file": "collector_agent.channels.file.channel:FileChannel",
        "kafka": "collector_agent.channels.kafka:KafkaChannel",
        "org.apache.flume.channel.kafka.KafkaChannel": "collector_agent.channels.kafka:KafkaChannel",
    },
    "sink": {
        "logger": "collector_agent.sinks.logger:LoggerSink",
        "null": "collector_agent.sinks.null:NullSink",
        "thrift": "collector_agent.sinks.thrift:ThriftSink",
        "avro": "collector_agent.sinks.avro:AvroSink",
        "vhms": "collector_agent.sinks.vhms:VhmsSink",
        "raw": "collector_agent.sinks.raw:RawSink",
        "kafka": "collector_agent.sinks.kafka:KafkaSink",
        "org.apache.flume.sink.kafka.KafkaSink": "collector_agent.sinks.kafka:KafkaSink",
    },
    "processor": {
        "default": "collector_agent.sink_processors.default:DefaultSinkProcessor",
        "failover": "collector_agent.sink_processors.failover:FailoverSinkProcessor",
        "load_balance": "collector_agent.sink_processors.load_balance:LoadBalancingSinkProcessor",
    },
    "selector": {
        "replicating": "collector_agent.selectors.replicating:ReplicatingChannelSelector",
        "multiplexing": "collector_agent.selectors.multiplexing:MultiplexingChannelSelector",
    },
    "interceptor": {
        "timestamp": "collector_agent.interceptors.timestamp:TimestampInterceptor",
        "host": "collector_agent.interceptors.host:HostInterceptor",
        "static": "collector_agent.interceptors.static:StaticInterceptor",
        "regex_filter": "collector_agent.interceptors.regex_filter:RegexFilterInterceptor",
    },
}


def register(kind: str, alias: str, target: str) -> None:
    """Add an alias (``register("sink", "vhms", "collector_agent.sinks.vhms:VhmsSink")``).
    The target is checked when a configuration names the alias, like any other type."""
    if kind not in REGISTRY:
        raise ConfigurationError(f"unknown component kind {kind!r} (kinds: {', '.join(REGISTRY)})")
    REGISTRY[kind][alias] = target


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def resolve(kind: str, type_name: str, key: str, *, allow_classes: bool = True) -> type[Any]:
    """The class for ``type_name`` of ``kind``, a subclass of ``BASES[kind]``; ``key`` names
    the setting in errors. With ``allow_classes`` false only an alias is accepted."""
    table = REGISTRY[kind]
    base = BASES[kind]
    name = type_name.strip()
    known = ", ".join(sorted(table))
    if name in table:
        target, origin = table[name], f"alias {name!r} -> {table[name]}"
    elif not allow_classes:
        raise ConfigurationError(
            f"{key}: {kind} type {name!r} is not a registered alias, and this configuration "
            f"(from ZooKeeper) may name aliases only (known: {known}); "
            "`artimon agent --allow-remote-classes` lifts this"
        )
    else:
        target, origin = name, repr(name)
    if ":" in target:
        module_name, _, class_name = target.partition(":")
    else:
        module_name, _, class_name = target.rpartition(".")
    if not module_name or not class_name:
        raise ConfigurationError(f"{key}: unknown {kind} type {name!r} (known: {known}, or module:Class)")
    try:
        found = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(
            f"{key}: {kind} type {origin} ({module_name}:{class_name}) cannot be loaded: {exc}"
        ) from None
    expected = f"a {kind} type must be a subclass of {_qualified(base)}"
    if not isinstance(found, type):
        raise ConfigurationError(
            f"{key}: {kind} type {origin} is {module_name}:{class_name}, "
            f"a {type(found).__name__}, not a class; {expected}"
        )
    if not issubclass(found, base):
        raise ConfigurationError(
            f"{key}: {kind} type {origin} is the class {_qualified(found)}, "
            f"which is not a {base.__name__}; {expected}"
        )
    return found
