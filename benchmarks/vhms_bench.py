"""VHMS: ingest rate, bytes per series at default retention, selector and fetch times, side
by side with Graphite's whisper on the same data and retentions. Prints a table, writes
results/vhms_bench.json.

Targets (issue 5): ingest >= 3M samples/s (columnar batches of 10K); a fetch of 10K series
x 60 minutes in <= 50 ms; picking ~100K series out of 1.5M by labels in milliseconds.
Issue 21: the first round of new series (a restart, a burst of new hosts) >= 1M series/s;
steady rounds >= 5M samples/s on a quiet machine (1-minute load average below 1.5 when the
size's run begins), >= 3M on a loaded one;
memory per series all in (RSS: buckets and index; issue 26: no key text kept) with every bucket of the default
retention written, <= 2.5 KB at 100K series and <= 2.0 KB at 1.5M; issue 27 (coarse rings
kept compressed): <= 1.5 KB at 1.5M (moonshot 1.0 KB). "Every bucket written" is three days
of a workload ingested forward in time (``Workload``: 60% counters, 20% gauges of two
decimals, 10% flat, 10% full-precision floats; rounds as sparse as still write every bucket
of every default ring: ``retention_times``), so the coarse rings hold what they would hold.
Issue 27 (``--baseline``): a fetch from the compressed coarse rings within 1.5x the CPU time of
the same buckets in plain coarse rings, side by side in one run (``_coarse_baseline.py``).
Issue 14: a fetch fanned out to 4 shards of 100K series merges >= 5x faster than the loop by
key it replaced (kept here as ``loop_merge``, the reference).
Issue 15: ingest through the service (Thrift, batches of 10K, from client processes) with
the write-ahead log on (fsync ``always``) >= 2M samples/s, measured side by side with the
log off in the same run.

Whisper keeps a file per series: it is measured on a sample of series (``--whisper-series``)
and compared per sample and per series.

``--first-round-baseline DIR``: the first round of the largest size timed against the same
round in another checkout of the code, by turns in child processes (``_first_round.py``).

Run: python benchmarks/vhms_bench.py [--quick] [--store-only] [--sizes N,...] [--baseline]
[--first-round-baseline DIR]
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import whisper
from _coarse_baseline import compare
from _report import progress, report

from bookkeeper.wire import IngestColumns
from vhms import FetchResult, VhmsClient, merge_results, parse_selector
from vhms.server import Store, VhmsService
from vhms.server.coarse import CoarseRing
from vhms.server.codec import encode_block
from vhms.server.rings import encode_values

MINUTE = 60_000
BATCH = 10_000
ROUNDS = 5
BASELINE_MAX = 200_000  # --baseline: a plain twin of the store beside it


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def make_keys(count: int) -> list[str]:
    # 100 series per host, 20 hosts per rack, 10 racks per dc: labels with realistic reuse
    return [
        f"app.metric{{dc=dc{i // 20000 % 5},grp=g{i % 150},host=h{i // 100},rack=r{i // 2000 % 10},"
        f"sensor=s{i % 100}}}"
        for i in range(count)
    ]


def _with_samples(sent: IngestColumns, values: np.ndarray, at: int) -> IngestColumns:
    """A batch's symbol table with this round's values (the first of ``values``) and time."""
    count = len(sent.name_ids)
    return replace(sent, values=values[:count], timestamps=np.full(count, at))


class Workload:
    """Values of ``count`` series at any time, by kind (series ``i``: ``i % 10``): 0-5 counters
    (integers, a rate of 0.01 to 100 a second each), 6-7 gauges of two decimals (a daily wave
    and noise), 8 flat (1.0), 9 full-precision floats (what no encoding shrinks)."""

    def __init__(self, count: int, start_ms: int) -> None:
        rng = np.random.default_rng(2)
        self.rng = rng
        self.start_ms = start_ms
        self.kind = np.arange(count) % 10
        self.rate = 10 ** rng.uniform(-2, 2, count)
        self.base = rng.integers(0, 10**6, count).astype(np.float64)
        self.phase = rng.random(count) * 2 * np.pi

    def at(self, ms: int) -> np.ndarray:
        seconds = (ms - self.start_ms) / 1000
        count = len(self.kind)
        counter = np.floor(self.base + self.rate * seconds)
        wave = 50 + 20 * np.sin(seconds * 2 * np.pi / 86400 + self.phase) + self.rng.normal(0, 0.5, count)
        return np.select(
            [self.kind < 6, self.kind < 8, self.kind < 9],
            [counter, np.round(wave, 2), np.ones(count)],
            self.rng.random(count) * 1000,
        )


def retention_times(end: int) -> list[int]:
    """Round times over the three days before ``end``, as sparse as still write every bucket of
    every default ring: hourly, then every 15 and 5 minutes, then each minute of the last hour."""
    hour = 60 * MINUTE
    return [
        *range(end - 72 * hour, end - 24 * hour, hour),
        *range(end - 24 * hour, end - 4 * hour, 15 * MINUTE),
        *range(end - 4 * hour, end - hour, 5 * MINUTE),
        *range(end - hour, end, MINUTE),
    ]


def fill_retention(store: Store, batches: list[IngestColumns], end: int) -> float:
    """Ingest three days of ``Workload`` up to ``end`` (every bucket of every ring written, the
    coarse rings sealing their blocks as they go); returns samples/s."""
    times = retention_times(end)
    workload = Workload(sum(len(b.name_ids) for b in batches), times[0])
    started = time.perf_counter()
    for at in times:
        values = workload.at(at)
        first = 0
        for batch in batches:
            store.ingest_columns(_with_samples(batch, values[first:], at))
            first += len(batch.name_ids)
    return len(times) * len(workload.kind) / (time.perf_counter() - started)


def encoded_sizes(count: int) -> dict[str, float]:
    """Bytes a bucket of each kind of ``Workload`` takes in a sealed block of the 5-minute
    ring (12 buckets), encoded alone."""
    block = Store().rings[1]
    assert isinstance(block, CoarseRing)
    workload = Workload(count, 0)
    steps = np.array([workload.at(k * 5 * MINUTE) for k in range(block.block)])
    stored = encode_values(steps)
    sizes = {}
    for kind, name in [(0, "counters"), (6, "gauges of 2 decimals"), (8, "flat"), (9, "full floats")]:
        columns = np.flatnonzero(workload.kind == kind)
        sizes[name] = encode_block(stored[:, columns]).nbytes / stored[:, columns].size
    return sizes


def bench_store(count: int, rows: list[dict[str, object]], baseline: bool = False) -> None:
    load = os.getloadavg()[0]
    steady_target = 5e6 if load < 1.5 else 3e6
    keys = make_keys(count)
    end = int(time.time() * 1000) // MINUTE * MINUTE - 2 * MINUTE
    start = end - (72 * 60 + ROUNDS + 1) * MINUTE  # then three days of workload up to ``end``
    values = np.random.default_rng(1).random(count) * 1000
    # the batches as an agent's sink hands them over: by their symbol tables (made here, once,
    # as the sink decodes them from its events, before RSS is first read: the store keeps no
    # text of them, so what RSS counts from there is the store's)
    batches = [
        IngestColumns.from_keys(keys[first : first + BATCH], values[first : first + BATCH], np.zeros(0))
        for first in range(0, count, BATCH)
    ]
    # imports and first calls (pyarrow's kernels) in a store of their own: a process's cost once
    Store(max_series=1).ingest(["warm.up{a=b}"], values[:1], np.full(1, start))
    gc.collect()
    before = rss_bytes()
    store = Store(max_series=count)

    started = time.perf_counter()
    cpu = time.process_time()
    for number in range(len(batches)):
        store.ingest_columns(
            _with_samples(batches[number], values[number * BATCH : (number + 1) * BATCH], start)
        )
    create_seconds = time.perf_counter() - started
    create_cpu = time.process_time() - cpu
    progress(
        f"{count:,} series: first round (creating the series) {create_seconds:.2f} s "
        f"({count / create_seconds:,.0f} series/s; CPU {create_cpu:.2f} s)"
    )

    steady = []
    for round_number in range(1, ROUNDS + 1):
        sent = [
            _with_samples(
                batches[number],
                values[number * BATCH : (number + 1) * BATCH] + round_number,
                start + round_number * MINUTE,
            )
            for number in range(len(batches))
        ]
        started = time.perf_counter()
        for columns in sent:
            store.ingest_columns(columns)
        steady.append(time.perf_counter() - started)
    seconds = min(steady)
    progress(f"{count:,} series: a round of ingest {seconds:.2f} s ({count / seconds:,.0f} samples/s)")
    del keys, values, sent
    gc.collect()
    per_series_now = (rss_bytes() - before) / count
    fill_rate = fill_retention(store, batches, end)
    del batches  # what RSS counts from here is the store's
    gc.collect()
    per_series = (rss_bytes() - before) / count
    coarse = [ring.nbytes() for ring in store.rings[1:] if isinstance(ring, CoarseRing)]
    plain_coarse = sum(p for p, _ in coarse) / count
    sealed = sum(s for _, s in coarse) / count
    finest_plain, finest_sealed = (n / count for n in store.rings[0].nbytes())
    progress(
        f"{count:,} series: {per_series_now:,.0f} B per series after the rounds, {per_series:,.0f} B full "
        f"(finest ring: {finest_plain:,.0f} B plain, {finest_sealed:,.0f} B sealed; "
        f"coarse rings: {plain_coarse:,.0f} B plain, {sealed:,.0f} B sealed"
        f"); fill {fill_rate:,.0f} samples/s"
    )
    memory_target = 1500 if count >= 1_000_000 else 2500

    selector = parse_selector("app.metric{grp~g1[0-4]}")  # 5 of the 150 groups
    started = time.perf_counter()
    picked = store.index.match(selector)
    select_ms = (time.perf_counter() - started) * 1000

    ten_k = "app.metric{grp=g7}" if count <= 1_500_000 else ""
    fetches = {}
    for step, span in [
        (60, 60 * MINUTE),
        (300, 4 * 60 * MINUTE),
        (900, 24 * 60 * MINUTE),
        (3600, 72 * 60 * MINUTE),
    ]:
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            result = store.fetch(ten_k, end - span, end, resolution=step)
            runs.append((time.perf_counter() - started) * 1000)
        fetches[step] = (min(runs), result.values.shape)
    rows += [
        {
            "case": f"first round: new series created, {count:,} series",
            "vhms": count / create_seconds,
            "unit": "series/s",
            "target": ">= 1M",
            "met": count / create_seconds >= 1e6,
            "note": f"CPU {count / create_cpu:,.0f} series/s",
        },
        {
            "case": f"ingest, steady rounds, {count:,} series",
            "vhms": count / seconds,
            "unit": "samples/s",
            "target": f">= {steady_target / 1e6:.0f}M",
            "met": count / seconds >= steady_target,
            "note": f"load average {load:.1f} at the start: {'quiet' if load < 1.5 else 'loaded'}",
        },
        {
            "case": f"memory per series after {ROUNDS + 1} rounds (RSS, index included), {count:,} series",
            "vhms": per_series_now,
            "unit": "bytes",
        },
        {
            "case": f"memory per series, every bucket of the retention written (RSS, index included), "
            f"{count:,} series",
            "vhms": per_series,
            "unit": "bytes",
            "target": f"<= {memory_target:,}",
            "met": per_series <= memory_target,
            "note": f"coarse rings {plain_coarse:,.0f} B plain, {sealed:,.0f} B sealed",
        },
        {
            "case": f"three days of workload ingested forward (every ring sealing), {count:,} series",
            "vhms": fill_rate,
            "unit": "samples/s",
        },
        {
            "case": f"select {len(picked):,} of {count:,} series by label regex",
            "vhms": select_ms,
            "unit": "ms",
        },
        *(
            {
                "case": f"fetch {shape[0]:,} series x {shape[1]} buckets of {step} s",
                "vhms": ms,
                "unit": "ms",
                "target": "<= 50 ms" if step == 60 and shape[0] >= 10_000 else "",
                "met": ms <= 50 if step == 60 else None,
            }
            for step, (ms, shape) in fetches.items()
        ),
    ]
    if baseline and count <= BASELINE_MAX:
        progress(f"{count:,} series: coarse fetches against plain coarse rings (--baseline)")
        compare(store, end, ["app.metric{grp=g7}", "app.metric{dc=dc0}"], rows)
    elif baseline:
        progress(f"{count:,} series: no --baseline above {BASELINE_MAX:,} series (the plain twin's memory)")
    del store
    gc.collect()


def loop_merge(results: list[tuple[list[str], np.ndarray]]) -> tuple[list[str], np.ndarray]:
    """The merge before issue 14: shards answered keys, merged by a dict, a row at a time."""
    rows: dict[str, np.ndarray] = {}
    for keys, values in results:
        for key, row in zip(keys, values, strict=True):
            current = rows.get(key)
            rows[key] = row if current is None else np.where(np.isnan(current), row, current)
    merged = sorted(rows)
    return merged, np.vstack([rows[k] for k in merged])


def bench_merge(count: int, shards: int, rows: list[dict[str, object]]) -> None:
    """A fetch fanned out to ``shards`` shards of ``count`` series in all, merged."""
    keys = make_keys(count)
    start = (int(time.time() * 1000) // MINUTE - 60) * MINUTE
    stores = [Store(max_series=count) for _ in range(shards)]
    for shard, store in enumerate(stores):
        mine = keys[shard::shards]
        for minute in range(60):
            store.ingest(mine, np.full(len(mine), float(minute)), np.full(len(mine), start + minute * MINUTE))
    results: list[FetchResult] = [s.fetch("app.metric", start, start + 60 * MINUTE, 60) for s in stores]
    as_keys = [(r.keys, np.ascontiguousarray(r.values)) for r in results]
    timings: dict[str, list[float]] = {"loop": [], "columns": []}
    for _ in range(5):
        started = time.perf_counter()
        loop_keys, _ = loop_merge(as_keys)
        timings["loop"].append(time.perf_counter() - started)
        started = time.perf_counter()
        merged = merge_results(results)
        timings["columns"].append(time.perf_counter() - started)
    assert sorted(merged.keys) == loop_keys
    loop_ms, columns_ms = min(timings["loop"]) * 1000, min(timings["columns"]) * 1000
    progress(
        f"merge of {shards} shards x {count // shards:,} series: "
        f"loop {loop_ms:.0f} ms, columns {columns_ms:.1f} ms"
    )
    rows += [
        {
            "case": f"fetch merge, {shards} shards, {count:,} series x 60 min: today's loop",
            "vhms": loop_ms,
            "unit": "ms",
        },
        {
            "case": f"fetch merge, {shards} shards, {count:,} series x 60 min: by columns",
            "vhms": columns_ms,
            "unit": "ms",
        },
        {
            "case": "fetch merge speed-up (loop / columns)",
            "vhms": loop_ms / columns_ms,
            "unit": "x",
            "target": ">= 5",
            "met": loop_ms / columns_ms >= 5,
        },
    ]


SERVICE_CLIENTS = 2


def _service_client(address: tuple[str, int], count: int, part: int, start: int, go: Any, done: Any) -> None:
    """A writer process: its share of the batches of each round, sent when ``go`` says."""
    keys = make_keys(count)
    values = np.random.default_rng(1).random(count) * 1000
    firsts = range(part * BATCH, count, BATCH * SERVICE_CLIENTS)
    # each batch's symbol table made once, as an agent's sink has it from its events; a round
    # changes only its values and times (building tables from keys every round would take the
    # writers' CPU from the service on a 2-core machine)
    tables = [
        IngestColumns.from_keys(keys[first : first + BATCH], values[first : first + BATCH], np.zeros(0))
        for first in firsts
    ]
    with VhmsClient(*address) as client:
        for round_number in range(ROUNDS + 1):
            batches = [
                _with_samples(
                    table, values[first : first + BATCH] + round_number, start + round_number * MINUTE
                )
                for table, first in zip(tables, firsts, strict=True)
            ]
            go[round_number].wait()
            for batch in batches:
                client.ingest(batch)
            done.put(round_number)


def bench_service(count: int, rows: list[dict[str, object]]) -> None:
    """Ingest through a VhmsService (Thrift) from ``SERVICE_CLIENTS`` processes, batches of
    10K, with the write-ahead log off, then on (fsync ``always``), on fresh stores."""
    context = multiprocessing.get_context("spawn")
    start = (int(time.time() * 1000) // MINUTE - ROUNDS - 1) * MINUTE
    rates: dict[str, list[float]] = {}
    for mode in ("off", "on"):
        with tempfile.TemporaryDirectory(prefix="vhms-bench-") as data:
            service = VhmsService(
                Store(max_series=count), snapshot_dir=data, snapshot_every=0, http_port=None, wal=mode == "on"
            )
            service.start(register=False)
            go = [context.Event() for _ in range(ROUNDS + 1)]
            done = context.Queue()
            clients = [
                context.Process(
                    target=_service_client, args=((service.host, service.port), count, part, start, go, done)
                )
                for part in range(SERVICE_CLIENTS)
            ]
            for client in clients:
                client.start()
            seconds = []
            logged = []  # the log's bytes after each round
            for round_number in range(ROUNDS + 1):
                started = time.perf_counter()
                go[round_number].set()
                for _ in clients:
                    done.get(timeout=600)
                seconds.append(time.perf_counter() - started)
                logged.append(service.wal.stats["bytes"] if service.wal else 0)
            for client in clients:
                client.join()
            wal = dict(service.wal.stats) if service.wal else {}
            service.thrift.stop()
            if service.wal is not None:
                service.wal.close()
        rates[mode] = [count / s for s in seconds[1:]]
        steady = ", ".join(f"{rate:,.0f}" for rate in rates[mode])
        progress(f"service ingest, log {mode}: steady rounds {steady} samples/s")
        if wal:
            rows.append(
                {
                    "case": "write-ahead log, steady rounds: bytes per sample",
                    "vhms": (logged[-1] - logged[0]) / (count * ROUNDS),
                    "unit": "bytes",
                    "note": f"first round (keys) {logged[0] / count:.0f} B/sample; "
                    f"{wal['records']} records in {wal['fsyncs']} fsyncs",
                }
            )
    for mode in ("off", "on"):
        best = max(rates[mode])
        rows.append(
            {
                "case": f"service ingest, {SERVICE_CLIENTS} writer processes, batches of 10K, {count:,} "
                f"series, log {mode}",
                "vhms": best,
                "unit": "samples/s",
                "target": ">= 2M" if mode == "on" else "",
                "met": best >= 2e6 if mode == "on" else None,
                "note": f"median {statistics.median(rates[mode]):,.0f}",
            }
        )
    rows.append(
        {
            "case": "service ingest, log on / log off (best steady rounds)",
            "vhms": max(rates["on"]) / max(rates["off"]),
            "unit": "x",
        }
    )


def bench_whisper(count: int, rows: list[dict[str, object]]) -> None:
    directory = Path(tempfile.mkdtemp(prefix="whisper-bench-"))
    archives = [(60, 60), (300, 48), (900, 96), (3600, 72)]
    paths = [directory / f"s{i}.wsp" for i in range(count)]
    for path in paths:
        whisper.create(str(path), archives, aggregationMethod="last")
    start = int(time.time()) // 60 * 60 - (ROUNDS + 1) * 60
    steady = []
    for round_number in range(ROUNDS + 1):
        started = time.perf_counter()
        for i, path in enumerate(paths):
            whisper.update_many(str(path), [(start + round_number * 60, float(i + round_number))])
        steady.append(time.perf_counter() - started)
    seconds = min(steady[1:])
    started = time.perf_counter()
    for path in paths:
        whisper.fetch(str(path), start - 3600 + 60, start + (ROUNDS + 1) * 60)
    fetch_ms_per_series = (time.perf_counter() - started) * 1000 / count
    size = (directory / "s0.wsp").stat().st_size
    progress(f"whisper, {count} series: {count / seconds:,.0f} samples/s, {size} bytes per series")
    rows += [
        {
            "case": f"whisper: ingest (update_many, one point), {count} series",
            "whisper": count / seconds,
            "unit": "samples/s",
        },
        {"case": "whisper: bytes per series (file size, same retentions)", "whisper": size, "unit": "bytes"},
        {
            "case": "whisper: fetch 60 min, extrapolated to 10K series",
            "whisper": fetch_ms_per_series * 10_000,
            "unit": "ms",
        },
    ]
    for path in paths:
        path.unlink()
    directory.rmdir()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100K series only, fewer whisper series")
    parser.add_argument("--whisper-series", type=int, default=None)
    parser.add_argument("--store-only", action="store_true", help="the in-process store only")
    parser.add_argument("--sizes", default=None, help="series counts, comma-separated")
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="coarse fetches' CPU against the same buckets in plain coarse rings (sizes <= 200K)",
    )
    parser.add_argument(
        "--first-round-baseline",
        type=Path,
        default=None,
        help="a checkout of the code before: the first round of the largest size timed against it",
    )
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    sizes = (
        [int(n) for n in args.sizes.split(",")]
        if args.sizes
        else [100_000]
        if args.quick
        else [100_000, 1_500_000]
    )
    for count in sizes:
        bench_store(count, rows, args.baseline)
    if args.first_round_baseline is not None:
        from _first_round import compare as first_round_compare  # it imports this module

        first_round_compare(max(sizes), args.first_round_baseline, rows)
    for name, size in encoded_sizes(100_000).items():
        rows.append(
            {"case": f"a sealed 5-minute bucket of {name} (blocks of 12)", "vhms": size, "unit": "bytes"}
        )
    if args.store_only:
        report("vhms_bench", rows, ["case", "vhms", "unit", "target", "met", "note"])
        return
    bench_service(100_000, rows)
    bench_merge(100_000, 4, rows)
    bench_whisper(args.whisper_series or (200 if args.quick else 2000), rows)
    by_case = {row["case"]: row for row in rows}
    ours = next(r for r in rows if str(r["case"]).startswith("ingest, steady"))
    theirs = next(r for c, r in by_case.items() if c.startswith("whisper: ingest"))
    rows.append(
        {
            "case": "ingest ratio vhms / whisper (per sample)",
            "vhms": float(ours["vhms"]) / float(theirs["whisper"]),  # type: ignore[arg-type]
            "unit": "x",
        }
    )
    report("vhms_bench", rows, ["case", "vhms", "whisper", "unit", "target", "met", "note"])


if __name__ == "__main__":
    main()
