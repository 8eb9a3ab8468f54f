"""Evaluate the alerting rules of -f FILE every interval and send their notifications.
Queries go through the query API (--api, else $ARTIMON_API) or, with --zk, straight to the
VHMS shards. Prints a line per alert state change and per failed rule. --once evaluates
once, waits for the notifications and exits (status 1 if a rule or a notification failed);
--check only checks the file. Alert state is kept in --state across restarts. See
docs/alerts.md."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from artimon.commands._signals import stop_event
from query_dsl import Client, QueryError, ShardedSource
from query_dsl.alerts import AlertEngine, Evaluation, EvaluatorSource, QuerySource, iso_time, load_rules


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--file", type=Path, required=True, help="the rules file (YAML)")
    parser.add_argument(
        "--api", default=os.environ.get("ARTIMON_API"), help="query API URL (default $ARTIMON_API)"
    )
    parser.add_argument("--zk", default=None, help="query the shards registered in this ZooKeeper instead")
    parser.add_argument("--token", default=os.environ.get("ARTIMON_API_TOKEN"), help="bearer token for --api")
    parser.add_argument(
        "--state",
        type=Path,
        default=Path("artimon-data/alerts-state.json"),
        help="where alerts are kept across restarts (default artimon-data/alerts-state.json)",
    )
    parser.add_argument("--once", action="store_true", help="evaluate once, notify, and exit")
    parser.add_argument("--check", action="store_true", help="check the rules file and exit")
    parser.add_argument(
        "--notify-timeout",
        type=float,
        default=60.0,
        help="seconds to wait for queued notifications when stopping (default 60)",
    )


def report(evaluation: Evaluation) -> None:
    """A line per change of an alert's state, and per rule that failed (also `artimon up`'s)."""
    at = iso_time(evaluation.at_ms)
    for transition in evaluation.transitions:
        alert = transition.alert
        print(
            f"{at} {alert.state.value.upper():<8} {alert.rule} {alert.series or '(number)'} "
            f"value={alert.value:g} (was {transition.previous.value})",
            flush=True,
        )
    for rule, error in evaluation.errors.items():
        print(f"{at} ERROR    {rule}: {error}", flush=True)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_rules(args.file)
    except QueryError as exc:
        print(f"artimon alerts: {exc}", file=sys.stderr)
        return 2
    if args.check:
        print(f"{args.file}: {len(config.rules)} rule(s), {len(config.receivers)} notifier(s): OK")
        return 0
    sharded = None
    source: QuerySource
    if args.zk:
        sharded = ShardedSource(args.zk)
        source = EvaluatorSource(sharded)
    elif args.api:
        source = Client(args.api, token=args.token)
    else:
        print("artimon alerts: give --api (or $ARTIMON_API) or --zk", file=sys.stderr)
        return 2
    engine = AlertEngine(config, source, state_file=args.state)
    failed = False
    try:
        print(
            f"alerts: {len(config.rules)} rule(s) from {args.file}, every {config.interval_ms / 1000:g} s, "
            f"state in {args.state}",
            flush=True,
        )
        if args.once:
            evaluation = engine.evaluate()
            report(evaluation)
            failed = bool(evaluation.errors)
        else:
            engine.run(stop_event(), report)
    finally:
        engine.close(args.notify_timeout)
        if isinstance(source, Client):
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
