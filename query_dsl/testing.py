"""Stores for tests: one filled with the series of ``artimon up --demo`` (bookkeeper/demo.py): the same
names and labels, an hour of minutes by default, without ZooKeeper or an agent. For tests,
for trying dashboards (``vhms.LocalClient(demo_store())``) and for the docs' screenshots; and
the PromQL cross-check dataset loaded into a store (:func:`load_store`)."""

from __future__ import annotations

import time

import numpy as np

from bookkeeper.wire import format_series
from query_dsl.promql.dataset import Series
from vhms.server import Store

__all__ = ["demo_store", "load_store"]

_MINUTE = 60_000
_METHODS = {"GET": 0.7, "POST": 0.2, "PUT": 0.07, "DELETE": 0.03}
_STATUSES = {"200": 0.93, "404": 0.04, "500": 0.03}
# the framework labels every up --demo series carries besides its own (host is the machine's name)
_FRAMEWORK = {"env": "default", "host": "demo-host"}
_WEB = {"context": "demo.web", "dc": "par", "rack": "r1", **_FRAMEWORK}
_STORAGE = {"context": "demo.storage", "dc": "par", "rack": "r2", **_FRAMEWORK}


def demo_store(end_ms: int | None = None, *, minutes: int = 60, seed: int = 42) -> Store:
    """A store whose last sample is at ``end_ms`` (default: the current minute), one sample a
    minute for ``minutes`` minutes; the same ``seed`` gives the same values."""
    rng = np.random.default_rng(seed)
    end = (int(time.time() * 1000) if end_ms is None else end_ms) // _MINUTE * _MINUTE
    times = end - _MINUTE * np.arange(minutes - 1, -1, -1, dtype=np.int64)
    series: dict[str, np.ndarray] = {}
    # a daily-looking swell of load, requests counted since start, as the bookkeeper does
    load = 6000 + 2500 * np.sin(np.linspace(0, 3, minutes)) + rng.normal(0, 300, minutes)
    for method, method_share in _METHODS.items():
        for status, status_share in _STATUSES.items():
            per_minute = np.maximum(load * method_share * status_share * rng.uniform(0.9, 1.1, minutes), 0)
            key = format_series("http.requests", {**_WEB, "method": method, "status": status})
            series[key] = np.cumsum(per_minute).round()
    series[format_series("http.latency.ms", _WEB)] = 20 + rng.exponential(15, minutes)
    for host in ("db1", "db2"):
        for volume in ("/", "/data", "/logs"):
            size = 500 * 2.0**30
            used = rng.integers(50, 300) * 2.0**30 + np.cumsum(rng.integers(0, 2**28, minutes)).astype(float)
            labels = {**_STORAGE, "server": host, "volume": volume}
            series[format_series("disk.size.bytes", labels)] = np.full(minutes, size)
            series[format_series("disk.used.bytes", labels)] = used
    for rack in ("r1", "r2", "r3", "r4"):
        temperature = 24.0 + int(rack[1:]) + rng.normal(0, 0.5, minutes)
        labels = {"context": "demo.racks", "dc": "par", "rack": rack, **_FRAMEWORK}
        series[format_series("rack.temperature.celsius", labels)] = temperature.round(2)
    series[format_series("app.up", _WEB)] = np.ones(minutes)
    store = Store()
    keys = list(series)
    for column, ts in enumerate(times.tolist()):
        store.ingest(keys, np.array([series[k][column] for k in keys]), np.full(len(keys), ts))
    store.ingest_strings([format_series("app.version", _WEB)], ["1.0.0"], np.array([end]))
    return store


def load_store(series: list[Series], store: Store) -> int:
    """Ingest the series of the cross-check dataset (:mod:`query_dsl.promql.dataset`) into
    ``store``; the number of samples stored."""
    keys: list[str] = []
    values: list[np.ndarray] = []
    times: list[np.ndarray] = []
    for each in series:
        keys += [format_series(each.name, each.labels)] * len(each.values)
        values.append(each.values)
        times.append(each.times_ms)
    return store.ingest(keys, np.concatenate(values), np.concatenate(times))
