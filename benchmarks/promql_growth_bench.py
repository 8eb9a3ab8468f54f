"""PromQL's growth with the number of series, in process: query_bench.py's PromQL cases
through the engine (no server, no peers), at each size, best of N in CPU time.

Each size (``--sizes``, 100,000 and 1,000,000 counters by default, with a tenth as many
gauges) is loaded into one store as query_bench.py loads VHMS (``--minutes`` of one-minute
buckets), then each case runs ``--repeat`` times, its answer written as Prometheus's JSON text (the
``data`` object the query API sends; not decoded: decoding it is the client's work, and at a
million series Python's decode of the matched division's answer is most of its time).
With ``--baseline CHECKOUT`` the same measurement runs first on that checkout's code (a
process of its own, then one on this tree's, one after the other, so the two never share
the machine's cores), and the report puts the two side by side: the time at each size and
its growth from the smallest size to the largest, of the best run and of the median (a run
that pays the page faults of arrays mapped afresh shows in the median, not in the best).

    PYTHONPATH=. python benchmarks/promql_growth_bench.py [--baseline ../integ] [--sizes 100000,1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent


def measure(sizes: list[int], minutes: int, repeat: int) -> dict[str, dict[str, dict[str, float]]]:
    """CPU ms (the best and the median of ``repeat``) per case and size, on the code this
    process imports."""
    from _query_cases import cases
    from _query_data import MINUTE, Data, load_store
    from _query_servers import RESOLUTIONS

    from query_dsl.evaluator import Limits
    from vhms import LocalClient
    from vhms.server import Store

    out: dict[str, dict[str, dict[str, float]]] = {"best": {}, "median": {}}
    for count in sizes:
        data = Data(count, minutes, int(time.time()) * 1000 // MINUTE * MINUTE - MINUTE)
        most = data.rows + 10
        store = Store(RESOLUTIONS, max_series=most, max_series_per_query=most, max_points_per_query=10**10)
        started = time.process_time()
        load_store(store, data)
        loaded = f"{count:,}: loaded in {time.process_time() - started:.0f} s of CPU ({store_module()})"
        print(loaded, file=sys.stderr, flush=True)
        source = LocalClient(store)
        limits = Limits(max_points=10**10, max_series=10**8, timeout_s=600, max_bytes=1 << 40)
        for case in cases(data):
            run = _runner(source, case.endpoint, case.params, limits)
            spent = []
            for _ in range(repeat):
                started = time.process_time()
                run().to_prometheus_body()
                spent.append((time.process_time() - started) * 1000)
            best, median = min(spent), statistics.median(spent)
            out["best"].setdefault(case.name, {})[str(count)] = best
            out["median"].setdefault(case.name, {})[str(count)] = median
            print(f"{count:,} | {case.name}: {best:.1f} ms, median {median:.1f}", file=sys.stderr, flush=True)
        del store, source
    return out


def _runner(source: Any, endpoint: str, params: dict[str, Any], limits: Any) -> Callable[[], Any]:
    """A case's query on ``source``, instant or range as its endpoint says."""
    from query_dsl.promql import instant_query, range_query

    if endpoint == "query":
        return lambda: instant_query(source, params["query"], params["time"], limits=limits)
    return lambda: range_query(
        source, params["query"], params["start"], params["end"], params["step"], limits=limits
    )


def store_module() -> str:
    """Where this process's store code comes from (the checkout measured)."""
    import vhms.server.store

    return str(vhms.server.store.__file__)


def side(checkout: Path, args: argparse.Namespace) -> dict[str, dict[str, dict[str, float]]]:
    """:func:`measure` in a child process on ``checkout``'s code."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--sizes", args.sizes]
    command += ["--minutes", str(args.minutes), "--repeat", str(args.repeat)]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(command, env=env, cwd=checkout, stdout=subprocess.PIPE, check=True, timeout=7200)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--minutes", type=int, default=75)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="a checkout whose code is measured first, for 'before'")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.child:
        print(json.dumps(measure(sizes, args.minutes, args.repeat)))
        return
    runs = {"before": side(args.baseline, args)} if args.baseline else {}
    runs["after"] = side(HERE, args)
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; CPU ms of {args.repeat} runs")
    for stat in ("best", "median"):
        report({label: run[stat] for label, run in runs.items()}, stat, str(sizes[0]), str(sizes[-1]))


def report(runs: dict[str, dict[str, dict[str, float]]], stat: str, small: str, large: str) -> None:
    """The table of one statistic: each side's time at the smallest and the largest size, and
    its growth from one to the other."""
    head = [f"{label} {size}" for label in runs for size in (small, large)]
    growth_head = " | ".join(f"growth {label}" for label in runs)
    print(f"\n{stat}:\n| query | " + " | ".join(head) + " | " + growth_head + " |")
    for name in runs["after"]:
        times = [runs[label][name][size] for label in runs for size in (small, large)]
        growth = [runs[label][name][large] / runs[label][name][small] for label in runs]
        cells = [f"{t:,.1f}" for t in times] + [f"{g:.1f}x" for g in growth]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
