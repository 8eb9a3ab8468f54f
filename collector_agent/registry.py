"""Component types by alias, as Flume resolves them (``ChannelType``, ``SourceType``...).

A ``type`` value is an alias from these tables, else a ``module:Class`` (or
``module.Class``) path to load. A failure raises ``ConfigurationError`` naming the key, the
alias and the class it tried.
"""

from __future__ import annotations

import importlib
from typing import Any

from collector_agent.exceptions import ConfigurationError

__all__ = ["REGISTRY", "register", "resolve"]

REGISTRY: dict[str, dict[str, str]] = {
    "source": {
        "seq": "collector_agent.sources.seq:SequenceSource",
        "thrift": "collector_agent.sources.thrift:ThriftSource",
        "artimon_file": "collector_agent.sources.artimon_file:ArtimonFileSource",
        "artimon": "collector_agent.sources.artimon:ArtimonSource",
    },
    "channel": {
        "memory": "collector_agent.channels.memory:MemoryChannel",
        "file": "collector_agent.channels.file:FileChannel",
    },
    "sink": {
        "logger": "collector_agent.sinks.logger:LoggerSink",
        "null": "collector_agent.sinks.null:NullSink",
        "thrift": "collector_agent.sinks.thrift:ThriftSink",
        "vhms": "collector_agent.sinks.vhms:VhmsSink",
        "raw": "collector_agent.sinks.raw:RawSink",
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
    """Add an alias (``register("sink", "vhms", "collector_agent.sinks.vhms:VhmsSink")``)."""
    REGISTRY[kind][alias] = target


def resolve(kind: str, type_name: str, key: str) -> Any:
    """The class for ``type_name`` of ``kind``; ``key`` names the setting in errors."""
    table = REGISTRY[kind]
    target = table.get(type_name.strip(), type_name.strip())
    if ":" in target:
        module_name, _, class_name = target.partition(":")
    else:
        module_name, _, class_name = target.rpartition(".")
    if not module_name or not class_name:
        known = ", ".join(sorted(table))
        raise ConfigurationError(
            f"{key}: unknown {kind} type {type_name!r} (known: {known}, or module:Class)"
        )
    try:
        return getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(
            f"{key}: {kind} type {type_name!r} -> {module_name}:{class_name} cannot be loaded: {exc}"
        ) from None
