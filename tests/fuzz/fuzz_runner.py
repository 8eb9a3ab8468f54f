"""Run the fuzz targets (``fuzz_targets``) under atheris, libFuzzer's coverage-guided engine
for Python, each for a time budget, and report per target the inputs tried, the crashes and
the peak RSS.

    python tests/fuzz/fuzz_runner.py --seconds 60 [--json out.json] [target ...]
    python tests/fuzz/fuzz_runner.py --reproduce thrift_flume crash-file

The targets' modules are imported once, uninstrumented; each target then runs in a child
forked from that process (so it pays no import), which instruments only the modules of its
target (their branches guide the fuzzer) and fuzzes from the target's seeds for
``--seconds``. A child's peak RSS is its own (``os.wait4``), the imports included; its limit
is the RSS at the fork plus ``--rss-limit-mb``: an input that allocates past it is a crash
(``oom``), as is one slower than ``--timeout`` seconds, and any exception the target lets
through. libFuzzer stops a target at its first crash and writes the input under the
artifact directory.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import re
import resource
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_targets import TARGETS, Target

_EXECUTED = re.compile(r"stat::number_of_executed_units: (\d+)")
_DONE = re.compile(r"Done (\d+) runs")
_ARTIFACT = re.compile(r"Test unit written to (\S+)")
_CRASH = re.compile(r"(=== Uncaught Python exception: ===.*?)(?:\n\n|==\d+==)", re.S)


def _instrument(prefixes: tuple[str, ...]) -> int:
    """Instrument every function of the modules under ``prefixes`` already imported."""
    count = 0
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType):
            module = getattr(obj, "__module__", None) or ""
            if any(module == p or module.startswith(p + ".") for p in prefixes):
                atheris.instrument_func(obj)
                count += 1
    return count


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _child(target: Target, seconds: float, options: argparse.Namespace, workdir: Path, limit_mb: int) -> None:
    log = os.open(workdir / "log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    _instrument(target.modules)
    corpus = workdir / "corpus"
    corpus.mkdir()
    for index, seed in enumerate(target.seeds):
        (corpus / f"seed-{index}").write_bytes(seed)
    argv = [
        sys.argv[0],
        str(corpus),
        f"-max_total_time={max(1, round(seconds))}",
        f"-max_len={target.max_len}",
        f"-rss_limit_mb={limit_mb}",
        f"-timeout={options.timeout}",
        f"-artifact_prefix={workdir}/",
        "-print_final_stats=1",
        f"-seed={options.seed}",
    ]
    if options.runs:
        argv.append(f"-runs={options.runs}")

    def one_input(data: bytes) -> None:
        try:
            target.one_input(data)
        except BaseException:  # atheris reports it; the input is kept for --reproduce
            (workdir / f"crash-{hashlib.sha1(data).hexdigest()}").write_bytes(data)
            raise

    atheris.Setup(argv, one_input)
    atheris.Fuzz()


def run_target(target: Target, seconds: float, options: argparse.Namespace) -> dict[str, Any]:
    """Fuzz ``target`` for ``seconds`` in a forked child; its row of the report."""
    workdir = Path(tempfile.mkdtemp(prefix=f"fuzz-{target.name}-", dir=options.workdir))
    start_mb = _rss_mb()
    limit_mb = int(start_mb + options.rss_limit_mb)
    sys.stdout.flush()
    sys.stderr.flush()
    began = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            _child(target, seconds, options, workdir, limit_mb)
        finally:
            os._exit(3)  # atheris.Fuzz() exits on its own; here only if it could not start
    _, status, usage = os.wait4(pid, 0)
    log = (workdir / "log").read_text(errors="replace")
    executed = _EXECUTED.search(log) or _DONE.search(log)
    artifacts = sorted(
        str(p) for p in workdir.iterdir() if p.name.split("-")[0] in ("crash", "oom", "timeout")
    )
    crash = _CRASH.search(log)
    error = crash.group(1).strip() if crash else ""
    if not error and status:
        error = "\n".join(line for line in log.splitlines() if "ERROR" in line or "Error" in line)[:2000]
    return {
        "target": target.name,
        "seconds": round(time.monotonic() - began, 1),
        "inputs": int(executed.group(1)) if executed else 0,
        "crashes": len(artifacts) or (1 if os.waitstatus_to_exitcode(status) else 0),
        "start_rss_mb": round(start_mb),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "exit": os.waitstatus_to_exitcode(status),
        "artifacts": artifacts,
        "error": error,
        "log": str(workdir / "log"),
    }


def reproduce(name: str, path: str) -> None:
    """Run one saved input through a target in this process (the traceback, if any)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    TARGETS[name].one_input(Path(path).read_bytes())
    used = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    print(f"{name}: no crash, {time.monotonic() - started:.2f} s, peak RSS +{used:.0f} MiB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("targets", nargs="*", help=f"of {', '.join(TARGETS)} (default: all)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per target")
    parser.add_argument("--runs", type=int, default=0, help="stop a target after so many inputs")
    parser.add_argument("--rss-limit-mb", type=int, default=1024, help="above the RSS at the fork")
    parser.add_argument("--timeout", type=int, default=10, help="seconds one input may take")
    parser.add_argument("--seed", type=int, default=0, help="libFuzzer's random seed (0: from the clock)")
    parser.add_argument("--workdir", default=None, help="where corpora, logs and crashing inputs go")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--reproduce", nargs=2, metavar=("TARGET", "INPUT"))
    options = parser.parse_args(argv)
    if options.reproduce:
        reproduce(*options.reproduce)
        return 0
    unknown = [name for name in options.targets if name not in TARGETS]
    if unknown:
        parser.error(f"unknown targets {unknown}; known: {', '.join(TARGETS)}")
    rows = []
    for name in options.targets or list(TARGETS):
        row = run_target(TARGETS[name], options.seconds, options)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k not in ("error", "log")}), flush=True)
        if row["error"]:
            print(row["error"], flush=True)
    if options.json:
        Path(options.json).write_text(json.dumps(rows, indent=2))
    return 1 if any(row["crashes"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
