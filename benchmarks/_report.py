"""Shared output of the benchmarks: a printed table and a JSON file side by side; and what
they read of a process from /proc (its CPU time, its resident memory)."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).with_name("results")


def progress(message: str) -> None:
    """A progress line on stderr, with the time of day (long runs say where they are)."""
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def report(name: str, rows: list[dict[str, Any]], columns: list[str]) -> Path:
    """Print ``rows`` as a table of ``columns`` and write them to results/<name>.json."""
    widths = [max(len(c), *(len(_cell(r.get(c))) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(_cell(row.get(c)).ljust(w) for c, w in zip(columns, widths, strict=True)))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(
        json.dumps(
            {
                "benchmark": name,
                "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "machine": {"python": platform.python_version(), "cpu": platform.machine()},
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"\nwrote {path}")
    return path


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` (every thread), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """The resident memory of process ``pid``, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")
