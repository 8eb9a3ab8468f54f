"""Shared output of the benchmarks: a printed table and a JSON file side by side."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).with_name("results")


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
