"""Manage agents' central configuration in ZooKeeper, for a group (--group) or one agent (--agent).

push checks a properties file as an agent does at start (every key, type and wiring; keys
no component knows refuse it too, unless --allow-unknown-keys), writes it as the next
version and makes it current, then waits for every agent that follows it to apply it. If
any agent refuses it, the previous version is made current again and push exits 1. pull
prints the current configuration (or --version N; --history lists the kept versions and
what each agent runs); diff prints a unified diff from the current one (or --version N) to
a file (-f), or between two versions (--version A --version B).

Exit status: 0 done (diff: no difference); 1 refused (nothing written, or rolled back; diff:
a difference); 2 ZooKeeper unreachable, access refused, or another push meanwhile; 3 not
every agent answered within --timeout (the new version stays current).
"""

from __future__ import annotations

import argparse
import difflib
import getpass
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kazoo.exceptions import KazooException, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError

from bookkeeper import ZkAccessError
from bookkeeper.zk import make_client, resolve_zk, resolve_zk_auth
from collector_agent import (
    Agent,
    AgentReport,
    CentralConfigError,
    ConfigConflictError,
    ConfigStore,
    ConfigTarget,
    ConfigurationError,
    load_properties,
)

REFUSED, UNREACHABLE, UNANSWERED = 1, 2, 3
_POLL = 0.2  # seconds between reads of the agents' reports while waiting


def run(args: argparse.Namespace) -> int:
    target = ConfigTarget("group", args.group) if args.group else ConfigTarget("agent", args.agent)
    action = {"push": _push, "pull": _pull, "diff": _diff}[args.action]
    try:
        with _store(args.zk) as store:
            return action(args, store, target)
    except (KazooTimeoutError, KazooException, ZkAccessError) as exc:
        print(f"artimon config {args.action}: ZooKeeper: {_plain(exc)}", file=sys.stderr)
        return UNREACHABLE
    except ConfigConflictError as exc:
        print(f"artimon config {args.action}: {exc}", file=sys.stderr)
        return UNREACHABLE
    except CentralConfigError as exc:
        print(f"artimon config {args.action}: {exc}", file=sys.stderr)
        return REFUSED


def _plain(exc: Exception) -> str:
    if isinstance(exc, NoAuthError):
        return (
            "access refused (give the platform's credentials: artimon --zk-auth-file or ARTIMON_ZK_AUTH_FILE)"
        )
    return str(exc) or type(exc).__name__


@contextmanager
def _store(zk: str | None) -> Iterator[ConfigStore]:
    connect, layout = resolve_zk(zk)
    auth = resolve_zk_auth()
    client = make_client(connect, auth=auth)
    client.start(timeout=15)
    try:
        yield ConfigStore(client, layout, auth, by=f"{getpass.getuser()}@{socket.gethostname()}")
    finally:
        client.stop()
        client.close()


def _agent_name(text: str, given: str | None) -> str:
    """The agent the file configures: ``given``, else the only prefix of its component keys."""
    if given:
        return given
    names = {
        key.split(".", 2)[0]
        for key in load_properties(text)
        if key.count(".") >= 1 and key.split(".", 2)[1] in ("sources", "channels", "sinks")
    }
    if len(names) != 1:
        raise ConfigurationError(f"the file configures agents {sorted(names)}: name one with -n")
    return names.pop()


def _check(args: argparse.Namespace, text: str) -> str | None:
    """Why the file may not be pushed (``None``: it may), checked as an agent checks it."""
    try:
        name = _agent_name(text, args.name)
        agent = Agent.from_properties(text, name, allow_classes=args.allow_remote_classes)
    except ConfigurationError as exc:
        return str(exc)
    if agent.warnings and not args.allow_unknown_keys:
        listed = "\n".join(f"  {warning}" for warning in agent.warnings)
        return f"keys no component knows (--allow-unknown-keys pushes anyway):\n{listed}"
    spec = agent.spec
    print(
        f"{args.conf_file}: agent {name} is valid: {len(spec.sources)} sources, "
        f"{len(spec.channels)} channels, {len(spec.sinks)} sinks"
    )
    return None


def _push(args: argparse.Namespace, store: ConfigStore, target: ConfigTarget) -> int:
    if args.keep < 2:
        print("artimon config push: --keep must be at least 2 (the current and the previous version)")
        return REFUSED
    try:
        text = args.conf_file.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        print(f"artimon config push: {exc}", file=sys.stderr)
        return REFUSED
    problem = _check(args, text)
    if problem is not None:
        print(f"artimon config push: {args.conf_file} refused, nothing written: {problem}", file=sys.stderr)
        return REFUSED
    current = store.current(target)
    if current is not None and store.read(target, current.version)[0] == text:
        print(f"{target}: version {current.version} is current and the same; nothing pushed")
        return 0
    followers = _followers(store, target)
    pointer = store.write(target, text, keep=args.keep)
    was = f"was {pointer.previous}" if pointer.previous else "its first"
    follow = "1 agent follows it" if len(followers) == 1 else f"{len(followers)} agents follow it"
    print(f"{target}: version {pointer.version} is current ({was}); {follow}")
    if args.no_wait or not followers:
        return 0
    answers = _wait(store, followers, pointer.version, args.timeout, rollback=False)
    refusals = {agent: r.reason for agent, r in answers.items() if r.refused == pointer.version}
    if refusals:
        return _roll_back(args, store, target, pointer.version, pointer.previous, refusals)
    missing = sorted(set(followers) - set(answers))
    if missing:
        print(f"{target}: no answer within {args.timeout:g} s from {', '.join(missing)}", file=sys.stderr)
        return UNANSWERED
    print(f"{target}: version {pointer.version} applied by {len(answers)} of {len(followers)} agents")
    return 0


def _followers(store: ConfigStore, target: ConfigTarget) -> list[str]:
    """The live agents that follow ``target`` (or, for a group, would: no version yet)."""
    followers = []
    for agent, report in store.reports().items():
        if not isinstance(report, AgentReport):
            continue
        mine = report.follows == target.key or (target.kind == "agent" and agent == target.name)
        newcomer = target.kind == "group" and report.group == target.name and not report.follows
        if mine or newcomer:
            followers.append(agent)
    return sorted(followers)


def _wait(
    store: ConfigStore, agents: list[str], version: int, timeout: float, *, rollback: bool
) -> dict[str, AgentReport]:
    """The reports of ``agents`` that applied (or, unless ``rollback``, refused) ``version``,
    printed as they come, until all came or ``timeout`` passed."""
    answered: dict[str, AgentReport] = {}
    deadline = time.monotonic() + timeout
    while len(answered) < len(agents) and time.monotonic() < deadline:
        reports = store.reports()
        for agent in agents:
            report = reports.get(agent)
            if agent in answered or not isinstance(report, AgentReport):
                continue
            if report.version == version:
                answered[agent] = report
                print(f"  {agent}: {'back on' if rollback else 'applied'} version {version}", flush=True)
            elif report.refused == version and not rollback:
                answered[agent] = report
                print(f"  {agent}: refused version {version}: {report.reason}", flush=True)
        if len(answered) < len(agents):
            time.sleep(_POLL)
    return answered


def _roll_back(
    args: argparse.Namespace,
    store: ConfigStore,
    target: ConfigTarget,
    version: int,
    previous: int,
    refusals: dict[str, str],
) -> int:
    who = ", ".join(sorted(refusals))
    if not previous:
        store.withdraw(target, version)
        print(
            f"{target}: version {version} refused by {who}; withdrawn (no earlier version)", file=sys.stderr
        )
        return REFUSED
    store.point(target, previous, rolled_back_from=version)
    print(f"{target}: version {version} refused by {who}; rolled back to version {previous}", file=sys.stderr)
    applied = [agent for agent in _followers(store, target) if agent not in refusals]
    back = _wait(store, applied, previous, args.timeout, rollback=True)
    if len(back) < len(applied):
        late = sorted(set(applied) - set(back))
        print(f"{target}: not back on version {previous} within {args.timeout:g} s: {', '.join(late)}")
    return REFUSED


def _pull(args: argparse.Namespace, store: ConfigStore, target: ConfigTarget) -> int:
    if args.history:
        return _history(store, target)
    version = args.version
    if version is None:
        current = store.current(target)
        if current is None:
            print(f"artimon config pull: {target} has no current version", file=sys.stderr)
            return REFUSED
        version = current.version
    text, _ = store.read(target, version)
    sys.stdout.write(text)
    return 0


def _history(store: ConfigStore, target: ConfigTarget) -> int:
    current = store.current(target)
    for version in store.versions(target):
        _, stat = store.read(target, version)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(stat.ctime / 1000))
        print(f"{'*' if current and current.version == version else ' '} v{version}  {stamp} UTC")
    if current is not None:
        back = f", rolled back from {current.rolled_back_from}" if current.rolled_back_from else ""
        print(f"current: version {current.version} (set by {current.by or '?'}{back})")
    followers = _followers(store, target)
    for agent, report in sorted(store.reports().items()):
        if agent in followers and isinstance(report, AgentReport):
            refused = f", refused {report.refused}: {report.reason}" if report.refused else ""
            print(f"  {agent}: runs version {report.version or '-'}{refused}")
    return 0


def _diff(args: argparse.Namespace, store: ConfigStore, target: ConfigTarget) -> int:
    if len(args.version) > 2 or (args.conf_file is None) == (len(args.version) < 2):
        print(
            "artimon config diff: give -f FILE (with at most one --version), or two --version",
            file=sys.stderr,
        )
        return UNREACHABLE
    sides: list[tuple[str, str]] = []
    for version in args.version:
        sides.append((f"{target} v{version}", store.read(target, version)[0]))
    if not args.version:
        current = store.current(target)
        if current is None:
            print(f"artimon config diff: {target} has no current version", file=sys.stderr)
            return REFUSED
        sides.append((f"{target} v{current.version}", store.read(target, current.version)[0]))
    if args.conf_file is not None:
        sides.append((str(args.conf_file), args.conf_file.read_text(encoding="utf-8")))
    (old_name, old), (new_name, new) = sides
    lines = list(difflib.unified_diff(old.splitlines(True), new.splitlines(True), old_name, new_name))
    sys.stdout.writelines(line if line.endswith("\n") else line + "\n" for line in lines)
    return REFUSED if lines else 0
