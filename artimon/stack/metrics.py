"""What ``artimon up`` adds to its query API's ``/metrics`` (and ``artimon spark
--metrics-port`` serves for ``raw_ingest``), so that a ``prometheus`` source collects them
into VHMS with the rest: how far Spark's ``raw_ingest`` lags behind the landing directory,
and ZooKeeper's own figures (its ``mntr`` command). Both are prometheus_client collectors,
read at each scrape; the alert engine's are :class:`query_dsl.alerts.AlertEngineMetrics`."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from artimon.servers import four_letter_word

__all__ = ["LandingBacklog", "ZooKeeperMetrics"]


class LandingBacklog:
    """The landing files ``raw_ingest`` has not taken yet (it deletes what it committed):
    how many, their bytes, and the age of the oldest, which is how far the Parquet history
    lags behind (0 when nothing waits)."""

    def __init__(self, landing: Path) -> None:
        self.landing = landing

    def collect(self) -> Iterator[Metric]:
        now, count, size, oldest = time.time(), 0, 0, None
        for path in self.landing.glob("*.avro"):  # closed files only: *.avro.tmp are being written
            try:
                stat = path.stat()
            except FileNotFoundError:  # taken by raw_ingest meanwhile
                continue
            count, size = count + 1, size + stat.st_size
            oldest = stat.st_mtime if oldest is None else min(oldest, stat.st_mtime)
        yield GaugeMetricFamily("artimon_raw_ingest_landing_files", "landing files not yet in Parquet", count)
        yield GaugeMetricFamily("artimon_raw_ingest_landing_bytes", "their bytes", size)
        lag = 0.0 if oldest is None else max(0.0, now - oldest)
        yield GaugeMetricFamily(
            "artimon_raw_ingest_lag_seconds", "age of the oldest landing file waiting", lag
        )


class ZooKeeperMetrics:
    """ZooKeeper's ``mntr`` answer as gauges ``zookeeper_<name>`` (its numeric lines:
    latencies, outstanding requests, znodes, watches, connections...), and ``zookeeper_up``:
    1 when the answer carried at least one such figure, 0 when nothing readable came within
    ``timeout`` (down, hung, reset mid-answer, not serving for want of a quorum, ``mntr`` not in
    its whitelist, or a peer that is not ZooKeeper answering garbage), as Prometheus's own ``up``
    is 0 for a scrape it could not parse."""

    def __init__(self, host: str, port: int, timeout: float = 2.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout

    def collect(self) -> Iterator[Metric]:
        figures = _mntr_figures(four_letter_word(self.host, self.port, "mntr", timeout=self.timeout))
        yield GaugeMetricFamily(
            "zookeeper_up", "ZooKeeper answered mntr with its figures", 1 if figures else 0
        )
        for key, number in figures.items():
            yield GaugeMetricFamily("zookeeper_" + key, f"ZooKeeper's mntr zk_{key}", number)


def _mntr_figures(answer: str) -> dict[str, float]:
    """The numeric ``zk_<name>\t<value>`` lines of a ``mntr`` answer, by name made safe for
    Prometheus (text lines such as ``zk_version`` and anything else are left out)."""
    figures = {}
    for line in answer.splitlines():
        key, _, value = line.partition("\t")
        if not key.startswith("zk_"):
            continue
        try:
            number = float(value)
        except ValueError:  # zk_version, zk_server_state: text
            continue
        figures[re.sub(r"[^a-zA-Z0-9_]", "_", key[3:])] = number
    return figures
