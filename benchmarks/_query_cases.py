"""The queries of ``query_bench.py`` (issue 27's, as the peers get them, with our DSL's form
beside each), the check of every answer against the peers' (the largest relative
difference over the points they share), and the rows made of their timings: per case and
size, and the growth per case and side from one size to the next."""

from __future__ import annotations

import itertools
import json
import math
import statistics
from dataclasses import dataclass
from typing import Any

from _query_data import COUNTER, GAUGE, MINUTE, Data

RACK = "r07"
PEERS = ("prometheus", "victoriametrics")
OURS = ("artimon", "promql", "before")  # the DSL, PromQL, PromQL on --baseline's code


@dataclass(frozen=True)
class Case:
    name: str
    target: float
    ours: str
    endpoint: str  # the peers': query or query_range
    params: dict[str, Any]


def cases(data: Data) -> list[Case]:
    """The issue's queries (27), as the peers get them, with our DSL's form beside each."""
    end, start = data.end, data.start
    at = end / 1000
    minutes = data.minutes
    history = f"{minutes // 60} h" if minutes % 60 == 0 else f"{minutes} min"
    hour = {"start": at - 3600, "end": at, "step": 60}
    increase_by_rack = "map(increase, 11m) | reduce(sum, by=[rack])"
    now = f'fetch("{COUNTER}", start={end}, end={end + 1})'
    share_ours = " / on(dc) group_left ".join(
        f'(fetch("{COUNTER}", start={end - 65 * MINUTE}, end={end + 1}) '
        f"| map(rate, 6m) | reduce(sum, by=[{by}]))"
        for by in ("dc, rack", "dc")
    )
    share_promql = (
        f"sum by (dc, rack) (rate({COUNTER}[5m])) / on(dc) group_left sum by (dc) (rate({COUNTER}[5m]))"
    )
    increase_promql = f"sum by (rack) (increase({COUNTER}[10m]))"
    return [
        Case(
            f"raw {COUNTER}{{rack={RACK}}}[10m]",
            2,
            f'fetch("{COUNTER}{{rack={RACK}}}", start={end - 10 * MINUTE}, end={end + 1})',
            "query",
            {"query": f'{COUNTER}{{rack="{RACK}"}}[10m]', "time": at},
        ),
        Case(
            "sum by rack of a 10-min increase",
            5,
            f'fetch("{COUNTER}", start={end - 10 * MINUTE}, end={end + 1}) | {increase_by_rack}',
            "query",
            {"query": increase_promql, "time": at},
        ),
        Case(
            "topk 10 of sum by host of rate[5m]",
            5,
            f'fetch("{COUNTER}", start={end - 5 * MINUTE}, end={end + 1}) '
            "| map(rate, 6m) | reduce(sum, by=[host]) | top(10)",
            "query",
            {"query": f"topk(10, sum by (host) (rate({COUNTER}[5m])))", "time": at},
        ),
        Case(
            "count",
            5,
            f"{now} | reduce(count)",
            "query",
            {"query": f"count({COUNTER})", "time": at},
        ),
        Case(
            "range: sum by rack of increase[10m], 1 h",
            5,
            f'fetch("{COUNTER}", start={end - 70 * MINUTE}, end={end + 1}) | {increase_by_rack}',
            "query_range",
            {"query": increase_promql, **hour},
        ),
        Case(
            "range: rack share of dc (rate[5m]), 1 h",
            5,
            share_ours,
            "query_range",
            {"query": share_promql, **hour},
        ),
        Case(
            f"range: mean by (dc, rack) of a gauge, {history} at 1 min",
            2,
            f'fetch("{GAUGE}", start={start}, end={end + 1}) | reduce(mean, by=[dc, rack])',
            "query_range",
            {"query": f"avg by (dc, rack) ({GAUGE})", "start": start / 1000, "end": at, "step": 60},
        ),
        Case(
            "matched division",
            5,
            f"{now} / on(dc, host, i, rack) {now}",
            "query",
            {"query": f"{COUNTER} / on(dc, host, i, rack) {COUNTER}", "time": at},
        ),
    ]


def ours_points(answer: dict[str, Any], keys: list[str]) -> dict[tuple[Any, ...], float]:
    """Artimon's answer as ``(labels restricted to keys..., time ms) -> value``."""
    points = {}
    for series in answer.get("series") or []:
        labels = tuple(series["labels"].get(k) for k in keys)
        for ts, value in zip(series["timestamps"], series["values"], strict=True):
            points[(*labels, ts)] = math.nan if value is None else float(value)
    return points


def peer_points(
    body: dict[str, Any], keys: list[str] | None = None
) -> tuple[list[str], dict[tuple[Any, ...], float]]:
    """A Prometheus API answer (vector or matrix) as its label keys (or ``keys``) and the
    same mapping."""
    result = body["data"]["result"]
    if keys is None:
        keys = sorted({k for series in result for k in series["metric"] if k != "__name__"})
    points = {}
    for series in result:
        labels = tuple(series["metric"].get(k) for k in keys)
        for ts, value in series.get("values") or [series["value"]]:
            points[(*labels, round(float(ts) * 1000))] = float(value)
    return keys, points


def difference(mine: dict[tuple[Any, ...], float], theirs: dict[tuple[Any, ...], float]) -> float:
    """The largest relative difference between Artimon's points and a peer's, over every
    point of the peer's answer (infinite when Artimon's answer lacks one)."""
    worst = 0.0
    for point, value in theirs.items():
        got = mine.get(point, math.nan)
        if math.isnan(got):
            return math.inf
        worst = max(worst, abs(got - value) / max(abs(value), 1e-300))
    return worst


def compare(bodies: dict[str, bytes], peers: list[str]) -> tuple[float, float, int]:
    """The largest relative differences of Artimon's DSL answer and of its PromQL answer to
    every peer's (over the peers' label keys), and the number of series of the DSL answer;
    the answers decoded one at a time."""
    worst = promql_worst = 0.0
    series_out = 0
    for peer in peers:
        keys, theirs = peer_points(json.loads(bodies[peer]))
        answer = json.loads(bodies["artimon"])
        series_out = len(answer.get("series") or [])
        worst = max(worst, difference(ours_points(answer, keys), theirs))
        del answer
        promql = peer_points(json.loads(bodies["promql"]), keys)[1]
        promql_worst = max(promql_worst, difference(promql, theirs))
    return worst, promql_worst, series_out


def case_row(
    case: Case, series: int, every: dict[str, list[float]], decode: dict[str, float], bodies: dict[str, bytes]
) -> dict[str, Any]:
    """One case at one size: each side's best and median time, the speedups against the
    faster peer, the values' largest difference to the peers' (``line``: the progress line)."""
    peers = [side for side in every if side not in OURS]
    best = {side: min(times) for side, times in every.items()}
    fastest_peer = min(best[peer] for peer in peers)
    speedup, promql_speedup = fastest_peer / best["artimon"], fastest_peer / best["promql"]
    worst, promql_worst, series_out = compare(bodies, peers)
    timings = ", ".join(f"{side} {ms:.1f} ms" for side, ms in best.items())
    return {
        "series": series,
        "case": case.name,
        **{f"{side}_ms": ms for side, ms in best.items()},
        "speedup": speedup,
        "target": f">= {case.target:g}x",
        "met": speedup >= case.target,
        "values_rel_diff": worst,
        "promql_speedup": promql_speedup,
        "promql_met": promql_speedup >= case.target,
        "promql_values_rel_diff": promql_worst,
        **(
            {
                "before_speedup": fastest_peer / best["before"],
                "promql_vs_before": best["before"] / best["promql"],
            }
            if "before" in best
            else {}
        ),
        **{f"{side}_median_ms": statistics.median(times) for side, times in every.items()},
        "series_out": series_out,
        **{f"{side}_decode_ms": ms for side, ms in decode.items()},
        "line": f"{series:,} | {case.name}: {timings} ({speedup:.1f}x, PromQL {promql_speedup:.1f}x; "
        f"{series_out} series; values differ by at most {worst:.1g}, PromQL's {promql_worst:.1g})",
    }


def growth(rows: list[dict[str, Any]], together: bool) -> list[dict[str, Any]]:
    """Per case and side, each size's best time and its growth from each size to the next
    (the time at the larger over the time at the smaller); ``together``: every size timed in
    the same rounds."""
    out = []
    for name in dict.fromkeys(row["case"] for row in rows):
        of_case = sorted((row for row in rows if row["case"] == name), key=lambda row: row["series"])
        for side in [side for side in (*OURS, *PEERS) if f"{side}_ms" in of_case[0]]:
            times = {row["series"]: row[f"{side}_ms"] for row in of_case}
            pairs = list(itertools.pairwise(times))
            out.append(
                {
                    "case": name,
                    "side": side,
                    **{f"{count}_ms": ms for count, ms in times.items()},
                    **{f"growth_{small}_{large}": times[large] / times[small] for small, large in pairs},
                    "together": together,
                }
            )
    return out


def growth_line(rows: list[dict[str, Any]]) -> str:
    """Each side's growth from each size to the next, of one case's rows (sizes ascending)."""
    sides = [side for side in (*OURS, *PEERS) if f"{side}_ms" in rows[0]]
    return "; ".join(
        f"{small['series']:,}->{large['series']:,} "
        + ", ".join(f"{side} {large[f'{side}_ms'] / small[f'{side}_ms']:.1f}x" for side in sides)
        for small, large in itertools.pairwise(rows)
    )
