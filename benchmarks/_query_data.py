"""The data of ``query_bench.py`` and its loading into each side, a block of series at a time.

Per size N: N counters ``app_requests_total`` (labels dc, rack, host, i: 50 series a host,
hosts dealt to 20 racks, 4 racks a dc) and N/10 gauges ``rack_temperature`` (integer
degrees, the same labels) x ``minutes`` of one-minute samples. Nothing holds the whole
size: the values are made a block of ``BLOCK`` series at a time, each block from a seed of
its own (the same values whenever and wherever it is made), and every side is loaded block
by block: Prometheus from OpenMetrics files (one per two-hour block of TSDB, written block
of series by block of series, ``promtool tsdb create-blocks-from openmetrics``),
VictoriaMetrics through ``/api/v1/import/prometheus`` in posts of ``POST_LINES`` lines.
A million series x 180 minutes held whole would be 1.6 GB of float64 in the benchmark's
process, and its text form a 16 GB file for promtool. VHMS is the exception: it is loaded
through its ingest minute after minute as the agents' rounds write (``load_store``), so its
child process holds the size's values while it loads (0.6 GB at a million series x 75
minutes), then frees them.
"""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

from vhms.server import Store

MINUTE = 60_000
TSDB_BLOCK = 2 * 3600 * 1000  # promtool's default block: one file and one block each
BLOCK = 50_000  # series a block: the unit of making and of loading the data
POST_LINES = 500_000  # lines of exposition text a VictoriaMetrics import post
COUNTER, GAUGE = "app_requests_total", "rack_temperature"
# of the values and labels made below: raise it with any change to them, so that the stores
# ``query_bench.py --peer-cache`` kept of the data made before are not read as this data
DATA_VERSION = 1


def labels_of(i: int) -> dict[str, str]:
    """50 series a host, hosts dealt to 20 racks (5,000 series a rack at 100K), 4 racks a dc."""
    host = i // 50
    rack = host % 20
    return {"dc": f"dc{rack // 4}", "host": f"h{host}", "i": str(i % 50), "rack": f"r{rack:02d}"}


@dataclass(frozen=True)
class Block:
    """Series of one name: their labels and ``[series, minutes]`` values (integers, as float64)."""

    name: str
    labels: list[dict[str, str]]
    values: np.ndarray

    def keys(self) -> list[str]:
        """VHMS's keys, ``name{k=v,...}``."""
        return [f"{self.name}{{{','.join(f'{k}={v}' for k, v in labels.items())}}}" for labels in self.labels]

    def prometheus_series(self) -> list[str]:
        """Prometheus's text form of the same series (the same names on every side, so that
        the PromQL text runs unchanged on Artimon's ``/prometheus`` too)."""
        out = []
        for labels in self.labels:
            pairs = ",".join(f'{k}="{v}"' for k, v in labels.items())
            out.append(f"{self.name}{{{pairs}}}")
        return out


@dataclass(frozen=True)
class Data:
    """One size: ``count`` counters and ``count // 10`` gauges, ``minutes`` samples ending at ``end``."""

    count: int
    minutes: int
    end: int

    @property
    def start(self) -> int:
        return self.end - (self.minutes - 1) * MINUTE

    @property
    def rows(self) -> int:
        return self.count + self.count // 10

    def blocks(self) -> Iterator[Block]:
        """The counters then the gauges, ``BLOCK`` series at a time (gauge j has counter
        10 j's labels)."""
        for name, total, stride in ((COUNTER, self.count, 1), (GAUGE, self.count // 10, 10)):
            for low in range(0, total, BLOCK):
                high = min(low + BLOCK, total)
                rng = np.random.default_rng([5, stride, low])
                if name == COUNTER:
                    values = np.cumsum(rng.integers(0, 20, size=(high - low, self.minutes)), axis=1)
                else:
                    values = rng.integers(15, 35, size=(high - low, self.minutes))
                labels = [labels_of(i * stride) for i in range(low, high)]
                yield Block(name, labels, values.astype(np.float64))


def exposition(series: list[str], values: np.ndarray, stamp: str) -> str:
    """One minute of a block as exposition lines ``series value stamp`` (integer values)."""
    numbers = map(str, values.astype(np.int64).tolist())
    pieces = zip(series, itertools.repeat(" "), numbers, itertools.repeat(f" {stamp}\n"))
    return "".join(itertools.chain.from_iterable(pieces))


def load_store(store: Store, data: Data) -> None:
    """VHMS through its ingest as the agents' rounds write it: minute after minute, each
    minute every block of series in turn. The order matters since the finest ring seals its
    closed blocks (docs/vhms.md): a block of series written over the whole span, then the
    next, would decode the first's sealed blocks to take the next's samples, and they would
    stay decoded until a round moved the ring on, which a loaded history never sees."""
    blocks = [(block.keys(), block.values) for block in data.blocks()]
    for minute in range(data.minutes):
        for keys, values in blocks:
            stamps = np.full(len(keys), data.start + minute * MINUTE)
            store.ingest(keys, values[:, minute], stamps)


def prometheus_blocks(data: Data, work: Path, blocks: Path) -> None:
    """TSDB blocks for Prometheus in ``blocks``: per two-hour block of time, an OpenMetrics
    file of its minutes (in ``work``) written a block of series at a time, turned into a
    block by promtool, deleted (promtool holds one block's series in memory, never the whole
    file's text)."""
    minutes = range(data.minutes)
    for _, group in itertools.groupby(minutes, key=lambda m: (data.start + m * MINUTE) // TSDB_BLOCK):
        window = list(group)
        openmetrics = work / "data.om"
        with open(openmetrics, "w") as out:
            out.write(f"# TYPE {COUNTER} counter\n# TYPE {GAUGE} gauge\n")
            for block in data.blocks():
                series = block.prometheus_series()
                for minute in window:
                    stamp = f"{(data.start + minute * MINUTE) // 1000}"
                    out.write(exposition(series, block.values[:, minute], stamp))
            out.write("# EOF\n")
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(blocks)],
            check=True,
            capture_output=True,
        )
        openmetrics.unlink()


def load_victoria(data: Data, port: int) -> None:
    """VictoriaMetrics through its import API, posts of about ``POST_LINES`` lines."""
    with httpx.Client(timeout=600) as client:
        pending: list[str] = []
        lines = 0

        def post() -> None:
            client.post(
                f"http://127.0.0.1:{port}/api/v1/import/prometheus", content="".join(pending)
            ).raise_for_status()
            pending.clear()

        for block in data.blocks():
            series = block.prometheus_series()
            for minute in range(data.minutes):
                pending.append(exposition(series, block.values[:, minute], f"{data.start + minute * MINUTE}"))
                lines += len(series)
                if lines >= POST_LINES:
                    post()
                    lines = 0
        if pending:
            post()
        client.get(f"http://127.0.0.1:{port}/internal/force_flush").raise_for_status()
