"""Evaluate the alerting rules of -f FILE every interval and send their notifications.
Queries go through the query API (--api, else $ARTIMON_API) or, with --zk, straight to the
VHMS shards. Prints a line per alert state change and per failed rule. --once evaluates
once, waits for the notifications and exits (status 1 if a rule or a notification failed);
--check only checks the file (--check FILE... checks each, as ``promtool check rules``
does). Alert state is kept in --state across restarts; the state file's directory is held
(``in_use.lock``) for as long as this runs, so two processes never share one state.

A Prometheus rule file (``groups:`` of ``alert:``/``record:`` rules in PromQL) runs its
queries in this process over the shards with --zk, its recording rules writing their series
back through the same VHMS client; or, without recording rules, through the API's
``/prometheus`` with --api. --alertmanager URL sends every rule's alerts to
that Alertmanager (its v2 API), resent each minute while they fire. See docs/alerts.md."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from artimon.commands._metrics import serve_metrics
from artimon.commands._signals import stop_event
from artimon.commands._web import web_config_of
from artimon.stack import report_evaluation
from bookkeeper import DirectoryInUseError
from bookkeeper.ground import DirectoryLock, WebConfig
from query_dsl import Client, QueryError, ShardedSource
from query_dsl.alerts import (
    AlertConfig,
    AlertEngine,
    AlertEngineMetrics,
    AlertmanagerNotifier,
    EvaluatorSource,
    Fields,
    PromQLHttpSource,
    PromQLSource,
    QuerySource,
    Receiver,
    Recorder,
    RetryPolicy,
    load_rules,
)


def check(files: list[Path]) -> int:
    """promtool's ``check rules``: a verdict per file; 2 if any was refused."""
    refused = 0
    for path in files:
        print(f"Checking {path}")
        try:
            config = load_rules(path)
        except QueryError as exc:
            refused += 1
            print(f"  FAILED:\n{exc}\n")
            continue
        print(f"  SUCCESS: {len(config.rules) + len(config.recording)} rules found\n")
    return 2 if refused else 0


def _with_alertmanagers(config: AlertConfig, urls: list[str]) -> AlertConfig:
    """Every rule also notifies each Alertmanager of ``urls``, resent each minute (as
    Prometheus resends) unless the file says otherwise."""
    if not urls:
        return config
    receivers = dict(config.receivers)
    names = []
    for index, url in enumerate(urls):
        name = f"alertmanager-{index + 1}"
        fields = Fields({"url": url}, "--alertmanager", name)
        receivers[name] = Receiver(name, AlertmanagerNotifier.from_options(name, fields), RetryPolicy())
        names.append(name)
    rules = [
        replace(rule, notify=(*rule.notify, *names), repeat_interval_ms=rule.repeat_interval_ms or 60_000)
        for rule in config.rules
    ]
    return replace(config, rules=rules, receivers=receivers)


def run(args: argparse.Namespace) -> int:
    if args.check:
        return check(args.check)
    if args.file is None:
        print("artimon alerts: give -f FILE (or --check FILE...)", file=sys.stderr)
        return 2
    web_config = web_config_of(args, "alerts")
    try:
        config = _with_alertmanagers(load_rules(args.file), args.alertmanager)
    except QueryError as exc:
        print(f"artimon alerts: {exc}", file=sys.stderr)
        return 2
    if args.check is not None:
        print(f"{args.file}: {len(config.rules)} rule(s), {len(config.receivers)} notifier(s): OK")
        return 0
    sharded = None
    source: QuerySource
    recorder = None
    if config.language == "promql" and args.zk:
        sharded = ShardedSource(args.zk)
        source = PromQLSource(sharded)
        recorder = Recorder(config.recording, sharded, sharded)
    elif config.language == "promql" and config.recording:
        print("artimon alerts: recording rules write into VHMS: give --zk", file=sys.stderr)
        return 2
    elif config.language == "promql" and args.api:
        source = PromQLHttpSource(f"{args.api.rstrip('/')}/prometheus", token=args.token)
    elif args.zk:
        sharded = ShardedSource(args.zk)
        source = EvaluatorSource(sharded)
    elif args.api:
        source = Client(args.api, token=args.token)
    else:
        print("artimon alerts: give --api (or $ARTIMON_API) or --zk", file=sys.stderr)
        return 2
    try:
        with DirectoryLock(args.state.parent, "artimon alerts"):
            return _serve(args, config, source, sharded, recorder, web_config)
    except DirectoryInUseError as exc:
        print(f"artimon alerts: {exc} (its state file is not this process's to write)", file=sys.stderr)
        return 1


def _serve(
    args: argparse.Namespace,
    config: AlertConfig,
    source: QuerySource,
    sharded: ShardedSource | None,
    recorder: Recorder | None,
    web_config: WebConfig | None,
) -> int:
    """Evaluate the rules (once, or until stopped) with the state's directory held."""
    engine = AlertEngine(config, source, state_file=args.state, recorder=recorder)
    failed = False
    metrics = serve_metrics(args, "alerts", [AlertEngineMetrics(engine)], web_config)
    try:
        print(
            f"alerts: {len(config.rules)} rule(s)"
            + (f", {len(config.recording)} recording rule(s)" if config.recording else "")
            + f" from {args.file}, every {config.interval_ms / 1000:g} s, "
            f"state in {args.state}",
            flush=True,
        )
        if args.once:
            evaluation = engine.evaluate()
            report_evaluation(evaluation)
            failed = bool(evaluation.errors)
        else:
            engine.run(stop_event(), report_evaluation)
    finally:
        if metrics is not None:
            metrics.stop()
        engine.close(args.notify_timeout)
        if isinstance(source, Client | PromQLHttpSource):
            source.close()
        if sharded is not None:
            sharded.close()
    for name, stats in engine.dispatcher.stats().items():
        if stats.given_up or stats.dropped:
            failed = True
            print(
                f"notifier {name}: {stats.delivered} delivered, {stats.given_up} given up, "
                f"{stats.dropped} dropped; last error: {stats.last_error}",
                file=sys.stderr,
            )
    return 1 if failed and args.once else 0
