"""The agent: builds components from a spec, runs them, reloads by difference.

Start order: channels, then sink groups (each with its runner thread), then sources (a
runner thread for a pollable one); stop order is the reverse. A channel that cannot start
(a file channel whose directory another process holds, or cannot be read) does not stop the
agent: it is logged and left in ``ERROR`` (its puts and takes fail, so its sources and sinks
back off), the rest runs, and the agent tries to start it again after 1 s, then after twice
as long each time (at most 30 s) until it starts. A reload checks the whole new
configuration first (nothing changes if any key is bad), then restarts only what changed:
a channel that keeps its name and type keeps its object and its events (new settings are
applied in place); a source or sink group restarts when its own settings changed or a
channel it uses was replaced. Every source and sink it starts is handed the agent's round
ledger (``ledger``, :mod:`collector_agent.ledger`), which outlives reloads.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from collector_agent.builder import Built, SinkGroup, build
from collector_agent.channels.base import BasicChannel
from collector_agent.config import AgentSpec, load_properties, parse_agent
from collector_agent.exceptions import AgentError, ConfigurationError
from collector_agent.ledger import RoundLedger
from collector_agent.lifecycle import LifecycleState
from collector_agent.runners import Runner
from collector_agent.sinks.base import Sink
from collector_agent.sources.artimon import ArtimonSource
from collector_agent.sources.base import Source

__all__ = ["Agent"]

log = logging.getLogger(__name__)

DRAIN_IDLE_S = 1.0  # a stop waits for its sinks while they empty their channels...
DRAIN_MAX_S = 15.0  # ...for this long at most


class Agent:
    """A running (or runnable) agent; see the module doc."""

    def __init__(self, spec: AgentSpec, ledger: RoundLedger | None = None) -> None:
        self.spec = spec
        self.ledger = ledger or RoundLedger()
        self.channels: dict[str, BasicChannel] = {}
        self.sources: dict[str, Source] = {}
        self._source_runners: dict[str, Runner] = {}
        self._groups: dict[str, SinkGroup] = {}
        self._lock = threading.RLock()
        self.reloads = 0
        self.reload_failures = 0
        self.last_reload_error = ""  # why the last reload was refused or applied in part
        self.warnings: list[str] = []  # keys of the configuration that no component knows
        self._pending: Built | None = None
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None

    @classmethod
    def from_properties(
        cls,
        text: str,
        name: str,
        environ: dict[str, str] | None = None,
        *,
        allow_classes: bool = True,
        ledger: RoundLedger | None = None,
    ) -> Agent:
        """Parse and check ``text`` for agent ``name`` (``ConfigurationError`` on any problem);
        ``allow_classes=False`` checks it as a configuration from ZooKeeper (aliases only);
        ``ledger``: a round ledger shared with other agents of this process (else its own)."""
        agent = cls(parse_agent(load_properties(text, environ), name), ledger)
        agent._pending = build(agent.spec, {}, allow_classes)
        agent.warnings = agent._pending.warnings
        return agent

    @property
    def name(self) -> str:
        return self.spec.name

    def memberships(self) -> list[tuple[str, str, str]]:
        """``(ZooKeeper, group, agent id)`` of each of its sources that joins an agent group
        (the ``artimon`` source's ``/agents/<group>/<agent-id>``)."""
        with self._lock:
            sources = list(self.sources.values())
        return [(str(s.zk_hosts), s.group, s.agent_id) for s in sources if isinstance(s, ArtimonSource)]

    @property
    def sinks(self) -> dict[str, Sink]:
        return {sink.name: sink for group in self._groups.values() for sink in group.sinks}

    # -- running -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start every component (channels, sinks, sources)."""
        with self._lock:
            built = self._pending or build(self.spec, {})
            self._pending = None
            try:
                self._start(built, set(built.channels), set(built.groups), set(built.sources))
            except BaseException:
                self.stop()  # what did start stops again: nothing runs half-started
                raise
            self._stopping.clear()
            self._supervisor = threading.Thread(
                target=self._supervise, name=f"agent-{self.name}-channels", daemon=True
            )
            self._supervisor.start()
            log.info(
                "agent %s started: %d sources, %d channels, %d sink groups",
                self.name,
                len(self.sources),
                len(self.channels),
                len(self._groups),
            )

    def _start(self, built: Built, channels: set[str], groups: set[str], sources: set[str]) -> None:
        for name in channels:
            self._start_channel(built.channels[name])
            self.channels[name] = built.channels[name]
        self.channels = dict(built.channels)
        for name in groups:
            group = built.groups[name]
            for sink in group.sinks:
                sink.ledger = self.ledger
            group.processor.start()
            group.runner.start()
            self._groups[name] = group
        for name in sources:
            source = built.sources[name]
            source.ledger = self.ledger
            source.start()
            self.sources[name] = source
            if name in built.source_runners:
                self._source_runners[name] = built.source_runners[name]
                self._source_runners[name].start()

    def _start_channel(self, channel: BasicChannel) -> bool:
        """Start ``channel``; if it cannot, report it and leave it in ERROR (see the module doc)."""
        try:
            channel.start()
        except Exception as exc:
            channel.state = LifecycleState.ERROR
            log.error(
                "agent %s: channel %s cannot start (its sources and sinks back off; retrying): %s",
                self.name,
                channel.name,
                exc,
            )
            return False
        return True

    def _supervise(self) -> None:
        """Start the channels in ERROR again, after 1 s, then twice as long each time (30 s at most)."""
        delay = 1.0
        while not self._stopping.wait(delay):
            with self._lock:
                failed = [c for c in self.channels.values() if c.state is LifecycleState.ERROR]
                started = [c for c in failed if self._start_channel(c)]
            for channel in started:
                log.warning("agent %s: channel %s started", self.name, channel.name)
            delay = min(30.0, delay * 2) if len(started) < len(failed) else 1.0

    def _stop_source(self, name: str) -> None:
        runner = self._source_runners.pop(name, None)
        if runner is not None:
            runner.stop()
        self.sources.pop(name).stop()

    def _stop_group(self, name: str) -> None:
        group = self._groups.pop(name)
        group.runner.stop()
        group.processor.stop()

    def stop(self) -> None:
        """Stop sources, then sinks, then channels (a file channel closes cleanly). The
        components stay listed, so their final counters can still be read."""
        self._stopping.set()
        if self._supervisor is not None and self._supervisor is not threading.current_thread():
            self._supervisor.join(timeout=60)
        with self._lock:
            for name, source in self.sources.items():
                if name in self._source_runners:
                    self._source_runners[name].stop()
                source.stop()
            self._drain()
            for group in self._groups.values():
                group.runner.stop()
                group.processor.stop()
            for channel in self.channels.values():
                channel.stop()
            log.info("agent %s stopped", self.name)

    def _drain(self) -> None:
        """With the sources stopped, let the sinks take what their channels still hold, so a
        clean stop hands on what was accepted (a durable channel would keep it for the next
        start, a memory channel would lose it). Ends when the channels are empty, when they
        made no progress for ``DRAIN_IDLE_S`` (the next hop is down: the sinks back off), or
        after ``DRAIN_MAX_S``."""
        channels = {id(sink.channel): sink.channel for group in self._groups.values() for sink in group.sinks}
        deadline = time.monotonic() + DRAIN_MAX_S
        held, progressed = sum(c.size for c in channels.values()), time.monotonic()
        while held and time.monotonic() < min(deadline, progressed + DRAIN_IDLE_S):
            time.sleep(0.02)
            now = sum(c.size for c in channels.values())
            if now < held:
                held, progressed = now, time.monotonic()
        if held:
            kept = sum(c.size for c in channels.values() if c.durable_id is not None)
            report = log.info if kept == held else log.warning
            report(
                "agent %s stops with %d events in its channels, %d of them kept for its next start",
                self.name,
                held,
                kept,
            )

    def reload(self, text: str, environ: dict[str, str] | None = None, *, allow_classes: bool = True) -> bool:
        """Apply a new configuration by difference; ``False`` (and the old one keeps
        running) if it does not check out. ``allow_classes=False`` for a configuration that
        did not come from the operator's file (a znode): its types must be registered
        aliases (:func:`collector_agent.registry.resolve`)."""
        with self._lock:
            if not self.channels:
                raise AgentError(f"agent {self.name} is not started: start it before reloading")
            try:
                new = parse_agent(load_properties(text, environ), self.name)
                replaced = {
                    n
                    for n, s in self.spec.channels.items()
                    if n not in new.channels
                    or new.channels[n].type != s.type
                    or not self.channels[n].can_reconfigure(new.channels[n].context)
                }
                kept = {n: c for n, c in self.channels.items() if n not in replaced}
                built = build(new, kept, allow_classes)
            except ConfigurationError as exc:
                self._failed(str(exc))
                log.error(
                    "agent %s: new configuration refused, keeping the running one: %s",
                    self.name,
                    exc,
                )
                return False
            old = self.spec
            changed_sources = {
                n
                for n in self.sources
                if n not in new.sources
                or new.sources[n] != old.sources[n]
                or replaced & set(old.sources[n].channels)
            }
            changed_groups = {
                n
                for n in self._groups
                if n not in new.sinkgroups
                or new.sinkgroups[n] != old.sinkgroups[n]
                or any(
                    s not in new.sinks
                    or new.sinks[s] != old.sinks[s]
                    or replaced & set(old.sinks[s].channels)
                    for s in old.sinkgroups[n].sinks
                )
            }
            for name in changed_sources:
                self._stop_source(name)
            for name in changed_groups:
                self._stop_group(name)
            for name in replaced:
                self.channels[name].stop()
            for name, channel_spec in new.channels.items():
                if name in self.channels and name not in replaced and channel_spec != old.channels[name]:
                    self.channels[name].configure(channel_spec.context)
            self.spec = new
            fresh_channels = {n for n in new.channels if n not in self.channels or n in replaced}
            try:
                self._start(
                    built,
                    fresh_channels,
                    {n for n in new.sinkgroups if n not in self._groups},
                    {n for n in new.sources if n not in self.sources},
                )
            except Exception as exc:
                self._failed(f"applied in part: a component failed to start: {exc}")
                log.exception("agent %s: reload applied in part; a component failed to start", self.name)
                return False
            self.reloads += 1
            self.last_reload_error = ""
            log.info(
                "agent %s reloaded: restarted %d sources, %d sink groups; replaced %d channels",
                self.name,
                len(changed_sources),
                len(changed_groups),
                len(replaced),
            )
            return True

    def _failed(self, reason: str) -> None:
        self.reload_failures += 1
        self.last_reload_error = reason

    def metrics(self) -> dict[str, dict[str, float]]:
        """Every component's counters by Flume group name (``CHANNEL.c1``, ``SOURCE.r1``...), and
        the round ledger's gauges (``LEDGER.rounds``)."""
        with self._lock:
            components: list[Any] = [
                *self.sources.values(),
                *self.channels.values(),
                *self.sinks.values(),
            ]
        groups = {f"{c.kind}.{c.name}": c.metrics() for c in components}
        return groups | {"LEDGER.rounds": self.ledger.gauges()}
