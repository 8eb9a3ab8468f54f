"""How long ``artimon --help`` takes in a fresh process, beside ``python -c pass`` (the
interpreter's own start) and ``python -c "import bookkeeper"`` (the app library), and
``artimon <command> --help`` for the heaviest commands and ``query`` (issue 31); the median
of N runs each, in one run (ratios, fair on a loaded machine). Prints a table, writes results/cli_bench.json.

The command table and each command's arguments are read without importing what a command
runs (artimon/cli.py), so ``--help`` costs the interpreter, argparse and the modules of
the table. Target (issue 26): ``artimon --help`` under 0.5 s on an idle machine.

Run: python benchmarks/cli_bench.py [--quick] [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from typing import Any

from _report import report

CASES = {
    "python -c pass": ["-c", "pass"],
    "python -c 'import bookkeeper'": ["-c", "import bookkeeper"],
    "artimon --help": ["-m", "artimon", "--help"],
    "artimon up --help": ["-m", "artimon", "up", "--help"],
    "artimon query --help": ["-m", "artimon", "query", "--help"],
    "artimon spark --help": ["-m", "artimon", "spark", "--help"],
}
TARGET_S = 0.5


def seconds(arguments: list[str]) -> float:
    """Wall time of one fresh ``python <arguments>`` to its exit."""
    started = time.perf_counter()
    subprocess.run([sys.executable, *arguments], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 runs per case")
    parser.add_argument("--runs", type=int, default=15, help="fresh processes per case (default 15)")
    args = parser.parse_args()
    runs = 5 if args.quick else args.runs
    for arguments in CASES.values():  # warm the file cache and the byte-code once
        seconds(arguments)
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(runs):  # interleaved: a load that comes and goes touches every case alike
        for name, arguments in CASES.items():
            times[name].append(seconds(arguments))
    baseline = statistics.median(times["python -c pass"])
    rows: list[dict[str, Any]] = []
    for name, measured in times.items():
        median = statistics.median(measured)
        rows.append(
            {
                "case": name,
                "runs": runs,
                "median_s": round(median, 4),
                "min_s": round(min(measured), 4),
                "over_python_s": round(median - baseline, 4),
                "target": f"< {TARGET_S} s" if name == "artimon --help" else "",
            }
        )
    report("cli_bench", rows, ["case", "runs", "median_s", "min_s", "over_python_s", "target"])


if __name__ == "__main__":
    main()
