"""An agent's components built from its spec, not started: channels (a live channel of the
same name and type kept, its new settings checked on a scratch copy), sources with their
selector, interceptors and runner, sink groups with their sinks, processor and runner.
Every type is resolved through the registry (aliases only for a remote configuration),
every batch size checked against its channel's ``transactionCapacity``, and every key no
component asked for warned of with the closest known key."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collector_agent.channel_processor import ChannelProcessor
from collector_agent.channels.base import BasicChannel
from collector_agent.config import AgentSpec, ComponentSpec, SinkGroupSpec
from collector_agent.context import Context
from collector_agent.integrity import SetAside
from collector_agent.interceptors.base import Interceptor
from collector_agent.registry import resolve
from collector_agent.runners import Runner
from collector_agent.selectors.base import ChannelSelector
from collector_agent.sink_processors.base import SinkProcessor
from collector_agent.sinks.base import Sink
from collector_agent.sources.base import PollableSource, Source

__all__ = ["Built", "SinkGroup", "build"]

log = logging.getLogger(__name__)


@dataclass
class SinkGroup:
    """A sink group built: its sinks, its processor and the runner that drives it."""

    spec: SinkGroupSpec
    sinks: list[Sink]
    processor: SinkProcessor
    runner: Runner


@dataclass
class Built:
    """What :func:`build` made for a spec, not started yet, and the warnings of its unknown keys."""

    channels: dict[str, BasicChannel]
    sources: dict[str, Source]
    source_runners: dict[str, Runner]
    groups: dict[str, SinkGroup]
    warnings: list[str]


def _instantiate(spec: ComponentSpec, allow_classes: bool, contexts: list[Context]) -> Any:
    # resolve() checks the class against its kind's base before anything is called
    cls = resolve(spec.kind, spec.type, spec.prefix + "type", allow_classes=allow_classes)
    component = cls(spec.name)
    context = spec.context
    component.configure(context)
    contexts.append(context)
    return component


def _unknown_keys(contexts: list[Context]) -> list[str]:
    """A warning per key that no component asked for, with the closest known key."""
    warnings = []
    for context in contexts:
        for key, close in context.unknown_keys():
            hint = f"; did you mean {context.full_key(close)}?" if close else ""
            warnings.append(f"{context.full_key(key)} is not a known key, ignored{hint}")
    return warnings


def _build_source(
    spec: ComponentSpec,
    channels: dict[str, BasicChannel],
    limits: dict[str, int],
    allow_classes: bool,
    contexts: list[Context],
) -> tuple[Source, Runner | None]:
    source: Source = _instantiate(spec, allow_classes, contexts)
    context = spec.context
    bound = {name: channels[name] for name in spec.channels}
    selector_context = context.subset("selector")
    selector: ChannelSelector = resolve(
        "selector",
        selector_context.values.pop("type", "replicating"),
        spec.prefix + "selector.type",
        allow_classes=allow_classes,
    )()
    selector.configure(selector_context, bound)
    interceptors: list[Interceptor] = []
    for name in context.get_list("interceptors", []):
        interceptor_context = context.subset(f"interceptors.{name}")
        type_name = interceptor_context.values.pop("type", None)
        if type_name is None:
            raise context.error(f"interceptors.{name}.type", "is required")
        interceptor: Interceptor = resolve(
            "interceptor",
            type_name,
            context.full_key(f"interceptors.{name}.type"),
            allow_classes=allow_classes,
        )()
        interceptor.configure(interceptor_context)
        interceptors.append(interceptor)
    dead_letter_dir = Path(context.get_str("deadLetter.dir", "artimon-data/dead-letter"))
    source.channel_processor = ChannelProcessor(
        selector, interceptors, SetAside(source.counters, "source", dead_letter_dir)
    )
    batch_size = getattr(source, "batch_size", None)
    for channel in bound.values():
        limit = limits.get(channel.name)
        if batch_size is not None and limit is not None and batch_size > limit:
            raise context.error(
                "batchSize",
                f"{batch_size} exceeds transactionCapacity {limit} of channel {channel.name}",
            )
    runner = None
    if isinstance(source, PollableSource):
        runner = Runner(
            f"source {spec.name}",
            source.process,
            increment=source.backoff_increment,
            max_backoff=source.max_backoff,
        )
    return source, runner


def _build_group(
    spec: SinkGroupSpec,
    agent: AgentSpec,
    channels: dict[str, BasicChannel],
    limits: dict[str, int],
    allow_classes: bool,
    contexts: list[Context],
) -> SinkGroup:
    sinks: list[Sink] = []
    for sink_name in spec.sinks:
        sink_spec = agent.sinks[sink_name]
        sink: Sink = _instantiate(sink_spec, allow_classes, contexts)
        sink.channel = channels[sink_spec.channels[0]]
        limit = limits.get(sink.channel.name)
        batch_size = getattr(sink, "batch_size", None)
        if batch_size is not None and limit is not None and batch_size > limit:
            raise sink_spec.context.error(
                "batchSize",
                f"{batch_size} exceeds transactionCapacity {limit} of channel {sink.channel.name}",
            )
        sinks.append(sink)
    context = spec.context
    processor: SinkProcessor = resolve(
        "processor",
        context.values.pop("type", "default"),
        context.full_key("type"),
        allow_classes=allow_classes,
    )()
    processor.configure(context, sinks)
    increment = context.get_int("backoffSleepIncrement", 100, minimum=1) / 1000
    max_backoff = context.get_int("maxBackoffSleep", 5000, minimum=1) / 1000
    contexts.append(context)
    runner = Runner(
        f"sink group {spec.name}",
        processor.process,
        increment=increment,
        max_backoff=max_backoff,
    )
    return SinkGroup(spec, sinks, processor, runner)


def build(spec: AgentSpec, live: dict[str, BasicChannel], allow_classes: bool = True) -> Built:
    """Components for ``spec`` that are not running already (``live`` channels are
    reused when name and type match; their new settings are checked on a scratch copy).
    ``allow_classes`` false: types must be registered aliases (a remote configuration)."""
    channels: dict[str, BasicChannel] = {}
    limits: dict[str, int] = {}  # transactionCapacity as the new settings have it
    contexts: list[Context] = []
    for name, channel_spec in spec.channels.items():
        current = live.get(name)
        if current is not None:
            scratch = type(current)(name)
            context = channel_spec.context
            scratch.configure(context)  # check before applying
            contexts.append(context)
            channels[name] = current
        else:
            scratch = channels[name] = _instantiate(channel_spec, allow_classes, contexts)
        limit = getattr(scratch, "transaction_capacity", None)
        if isinstance(limit, int):
            limits[name] = limit
    sources, runners = {}, {}
    for name, source_spec in spec.sources.items():
        sources[name], runner = _build_source(source_spec, channels, limits, allow_classes, contexts)
        if runner is not None:
            runners[name] = runner
    groups = {
        name: _build_group(group_spec, spec, channels, limits, allow_classes, contexts)
        for name, group_spec in spec.sinkgroups.items()
    }
    warnings = _unknown_keys(contexts)
    for warning in warnings:
        log.warning("agent %s: %s", spec.name, warning)
    return Built(channels, sources, runners, groups, warnings)
