"""Check saved dashboards (``artimon dashboards [--check] DIR``), as ``promtool check`` does for
its files: every ``*.json`` of the directory is read and validated (names, size, panels,
every query parsed); each is reported on a line, and the exit code is 1 if any is invalid."""

from __future__ import annotations

import argparse
import sys

from query_dsl import DashboardDirectory


def run(args: argparse.Namespace) -> int:
    if not args.directory.is_dir():
        print(f"artimon dashboards: {args.directory} is not a directory", file=sys.stderr)
        return 2
    summaries = DashboardDirectory(args.directory).summaries()
    for summary in summaries:
        if summary.error:
            print(f"{summary.name}: INVALID: {summary.error}")
        else:
            print(f"{summary.name}: ok, {summary.panels} panels ({summary.title})")
    bad = sum(1 for s in summaries if s.error)
    print(f"{len(summaries)} dashboards, {bad} invalid")
    return 1 if bad else 0
