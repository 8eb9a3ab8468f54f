"""Run a collector agent from a Flume-style properties file, until Ctrl-C.

The file is re-read every --reload-interval seconds and applied by difference (a bad new
configuration is refused and the running one kept). With --config-group G (or
--config-from-zk) it also follows its central configuration in ZooKeeper, as written by
artimon config push, and reports what it runs. GET /metrics on the monitoring port
gives Flume's counters as JSON (?format=prometheus for Prometheus). With --zk the same
counters are served as a bookkeeper endpoint on --report-host; every listener binds
127.0.0.1 unless a flag says otherwise.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from artimon.commands._signals import stop_event
from artimon.commands._web import web_config_of
from collector_agent import (
    Agent,
    AgentError,
    ConfigFollower,
    ConfigurationError,
    ConfigWatcher,
    MonitorServer,
    SelfReporter,
)


def run(args: argparse.Namespace) -> int:
    if args.check:  # the check prints its findings itself
        logging.getLogger("collector_agent").setLevel(logging.ERROR)
    try:
        text = args.conf_file.read_text(encoding="utf-8")
        agent = Agent.from_properties(text, args.name)
    except (OSError, ConfigurationError) as exc:
        print(f"artimon agent: {exc}", file=sys.stderr)
        return 1 if args.check else 2
    if args.check:
        return _checked(agent, args)
    web_config = web_config_of(args, "agent")
    stop = stop_event()
    zk_hosts = args.zk or os.environ.get("ARTIMON_ZK")
    if (args.config_from_zk or args.config_group) and not zk_hosts:
        print("artimon agent: --config-from-zk and --config-group need --zk or ARTIMON_ZK", file=sys.stderr)
        return 2
    try:
        agent.start()
    except (AgentError, OSError) as exc:
        print(f"artimon agent: cannot start {args.name}: {exc}", file=sys.stderr)
        return 2
    monitor = None
    reporter = SelfReporter(agent.metrics, agent.name)
    reporter.start()
    try:
        if zk_hosts:
            reporter.bookkeeper.serve(args.report_host, zk_hosts=zk_hosts)
        if not args.no_monitor:
            monitor = MonitorServer(
                agent.metrics,
                agent.name,
                args.monitor_host,
                args.monitor_port,
                web_config=web_config,
                ledger=agent.ledger,
            )
            monitor.start()
        # how artimon status finds the monitoring; imported once the agent runs, not before
        from artimon.status import agent_service

        registration = agent_service([agent], zk_hosts, monitor.url) if monitor else None
    except (OSError, RuntimeError) as exc:  # an address that is not ours, a port taken
        print(f"artimon agent: cannot listen: {exc}", file=sys.stderr)
        agent.stop()
        reporter.stop()
        reporter.bookkeeper.close()
        return 2
    watcher = ConfigWatcher(agent, args.conf_file, interval=args.reload_interval)
    watcher.start()
    follower = _follower(agent, zk_hosts, args)
    where = f"; metrics on {monitor.url}/metrics" if monitor else ""
    print(f"agent {agent.name} running{where}. Ctrl-C stops it.", flush=True)
    try:
        stop.wait()
    finally:
        if follower is not None:
            follower.stop()
        watcher.stop()
        if registration is not None:
            registration.close()
        if monitor is not None:
            monitor.stop()
        agent.stop()
        reporter.stop()
        reporter.bookkeeper.close()
    print(f"agent {agent.name} stopped.", flush=True)
    return 0


def _checked(agent: Agent, args: argparse.Namespace) -> int:
    """``--check``: the configuration's warnings and a summary line."""
    for warning in agent.warnings:
        print(f"warning: {warning}")
    spec = agent.spec
    print(
        f"{args.conf_file}: agent {args.name} is valid: {len(spec.sources)} sources, "
        f"{len(spec.channels)} channels, {len(spec.sinks)} sinks, {len(agent.warnings)} warnings"
    )
    return 0


def _follower(agent: Agent, zk_hosts: str | None, args: argparse.Namespace) -> ConfigFollower | None:
    """The started follower of the agent's central configuration, if it has one."""
    if not (zk_hosts and (args.config_from_zk or args.config_group)):
        return None
    follower = ConfigFollower(
        agent,
        zk_hosts,
        agent_id=args.agent_id,
        group=args.config_group,
        allow_remote_classes=args.allow_remote_classes,
    )
    follower.start()
    return follower
