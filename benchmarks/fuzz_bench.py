"""Every fuzz target (tests/fuzz/fuzz_targets.py: each decoder and parser that reads what a
sender or an operator wrote) run longer than CI's brief run, one at a time, each in a child
process of its own: the inputs tried, the crashes (a crash stops its target; the input is
kept under the work directory for ``fuzz_runner.py --reproduce``) and the child's peak RSS,
imports included (about 145 MiB before the first input). Prints a table, writes
results/fuzz_bench.json; the load average is in the last row (the rate of inputs depends on
it, the crashes and the memory do not).

Targets (issue 28): no crash, and no target's peak RSS more than its memory limit above the
RSS it started with (``--rss-limit-mb``, 1 GiB: an input past it counts as a crash).

Run: python benchmarks/fuzz_bench.py [--seconds 60] [--rss-limit-mb 1024] [target ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _report import report

RUNNER = Path(__file__).resolve().parent.parent / "tests" / "fuzz" / "fuzz_runner.py"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("targets", nargs="*", help="default: all")
    parser.add_argument("--seconds", type=int, default=60, help="per target")
    parser.add_argument("--rss-limit-mb", type=int, default=1024)
    parser.add_argument("--workdir", default=None, help="kept: corpora, logs and crashing inputs")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="fuzz-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "rows.json"
    command = [sys.executable, str(RUNNER), "--seconds", str(args.seconds), "--json", str(out)]
    command += ["--rss-limit-mb", str(args.rss_limit_mb), "--workdir", str(workdir), *args.targets]
    load_before = os.getloadavg()[0]
    subprocess.run(command, check=False)
    rows = json.loads(out.read_text())
    table = [
        {
            "target": row["target"],
            "seconds": row["seconds"],
            "inputs": row["inputs"],
            "inputs/s": round(row["inputs"] / max(row["seconds"], 0.1)),
            "crashes": row["crashes"],
            "peak RSS MiB": row["peak_rss_mb"],
            "crashing input": ", ".join(row["artifacts"]),
        }
        for row in rows
    ]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    table.append({"target": f"load average before {load_before:.2f}, after {load} (2 cores)"})
    columns = ["target", "seconds", "inputs", "inputs/s", "crashes", "peak RSS MiB", "crashing input"]
    report("fuzz_bench", table, columns)
    print(f"work directory (corpora, logs): {workdir}")


if __name__ == "__main__":
    main()
