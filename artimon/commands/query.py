"""Run one query and print the result: a table (default), JSON or CSV. Reads through the
query API (--url, else $ARTIMON_API) or, with --zk, straight from the VHMS shards."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any

from bookkeeper.wire import format_labels
from query_dsl import Client, Evaluator, Matrix, QueryError, ShardedSource, strings_answer, to_csv


def _table(result: Matrix | float, last: int) -> str:
    """Series as rows: what all of them share once above the table, then a column for the
    name if it varies and one per label that varies, then the last ``last`` instants."""
    if not isinstance(result, Matrix):
        return f"{result:g}"
    if not len(result):
        return "(no series)"
    names, labels = result.names, result.labels
    keys = sorted({key for series in labels for key in series})
    varying = [key for key in keys if len({series.get(key) for series in labels}) > 1]
    shared = {key: labels[0][key] for key in keys if key not in varying}
    columns: list[tuple[str, list[str]]] = []
    if len(set(names)) > 1:
        columns.append(("name", list(names)))
    columns += [(key, [series.get(key, "-") for series in labels]) for key in varying]
    lines = []
    common = (names[0] if len(set(names)) == 1 else "") + (
        format_labels(shared) and f"{{{format_labels(shared)}}}"
    )
    if common:
        lines.append(f"{len(result)} series of {common}")
    widths = [min(40, max(len(title), *(len(cell) for cell in cells))) for title, cells in columns]
    stamps = result.timestamps.tolist()
    clock = "%H:%M" if all(t % 60_000 == 0 for t in stamps) else "%H:%M:%S"  # seconds when a step has them
    times = [time.strftime(clock, time.gmtime(t / 1000)) for t in stamps[-last:]]
    lines.append(
        "  ".join(
            [
                *(title.ljust(w) for (title, _), w in zip(columns, widths, strict=True)),
                *(f"{t:>10}" for t in times),
            ]
        )
    )
    for row, values in enumerate(result.values[:, -last:].tolist()):
        cells = [cell[row][:w].ljust(w) for (_, cell), w in zip(columns, widths, strict=True)]
        numbers = [f"{'-' if math.isnan(v) else f'{v:.4g}':>10}" for v in values]
        lines.append("  ".join([*cells, *numbers]))
    if len(stamps) > last:
        lines.append(
            f"({len(stamps) - last} earlier instants not shown: --last N shows more, --format csv all)"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        if args.zk:
            source = ShardedSource(args.zk)
            try:
                evaluator = Evaluator(source)
                result = evaluator.evaluate(args.query)
                warnings = evaluator.warnings
                strings = strings_answer(evaluator.strings)
            finally:
                source.close()
        else:
            if not args.url:
                print("artimon query: give --url (or $ARTIMON_API) or --zk", file=sys.stderr)
                return 2
            with Client(args.url, token=args.token) as client:
                result = client.query(args.query)
                warnings = client.warnings
                strings = client.strings
    except QueryError as exc:
        print(f"artimon query: {exc}", file=sys.stderr)
        return 1
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps(result.to_records() if isinstance(result, Matrix) else {"scalar": result}))
    elif args.format == "csv":
        print(to_csv(result), end="")
    else:
        texts = {(s["name"], tuple(sorted(s["labels"].items()))) for s in strings}
        if isinstance(result, Matrix) and texts:  # their rows would only show "-": the text instead
            keep = [
                row
                for row, (name, labels) in enumerate(zip(result.names, result.labels, strict=True))
                if (name, tuple(sorted(labels.items()))) not in texts
            ]
            result = result.select(keep)
        if not strings or not isinstance(result, Matrix) or len(result):
            print(_table(result, args.last))
        if strings:
            print(_strings_table(strings))
    return 0


def _strings_table(strings: list[dict[str, Any]]) -> str:
    """STRING series as rows: the labels that vary, the last value and when it was sampled."""
    labels = [s["labels"] for s in strings]
    names = [s["name"] for s in strings]
    keys = sorted({key for series in labels for key in series})
    varying = [key for key in keys if len({series.get(key) for series in labels}) > 1]
    columns: list[tuple[str, list[str]]] = []
    if len(set(names)) > 1:
        columns.append(("name", names))
    columns += [(key, [series.get(key, "-") for series in labels]) for key in varying]
    columns.append(("value", [str(s["value"]) for s in strings]))
    columns.append(
        ("sampled", [time.strftime("%H:%M:%S", time.gmtime(s["timestamp"] / 1000)) for s in strings])
    )
    widths = [min(60, max(len(title), *(len(cell) for cell in cells))) for title, cells in columns]
    lines = ["  ".join(title.ljust(w) for (title, _), w in zip(columns, widths, strict=True))]
    for row in range(len(strings)):
        lines.append(
            "  ".join(cells[row][:w].ljust(w) for (_, cells), w in zip(columns, widths, strict=True))
        )
    return "\n".join(lines)
