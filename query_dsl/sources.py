"""Where ``fetch`` reads: an in-process store (the embedded stack, tests) or every VHMS shard
registered in ZooKeeper (or listed), fanned out and merged before map and reduce."""

from __future__ import annotations

import logging
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from bookkeeper.zk.layout import resolve_zk
from bookkeeper.zk.registration import make_client
from vhms.client import VhmsClient
from vhms.store import FetchResult, Store

__all__ = ["DataSource", "ShardedSource", "StoreSource"]

log = logging.getLogger(__name__)


class DataSource(Protocol):
    def fetch(
        self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto"
    ) -> FetchResult: ...
    def series(self, selector: str) -> list[str]: ...
    def label_names(self) -> list[str]: ...
    def label_values(self, label: str) -> list[str]: ...


class StoreSource:
    """Reads a store in this process."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def fetch(self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto") -> FetchResult:
        return self.store.fetch(selector, start_ms, end_ms, resolution)

    def series(self, selector: str) -> list[str]:
        return [self.store.index.keys[i] for i in self.store.select(selector).tolist()]

    def label_names(self) -> list[str]:
        return self.store.index.label_names()

    def label_values(self, label: str) -> list[str]:
        return self.store.index.label_values(label)


def merge(results: list[FetchResult]) -> FetchResult:
    """One result from several shards' (same axis): series concatenated, a series found in
    two shards (a routing change) merged bucket by bucket, the first value winning."""
    base = results[0]
    rows: dict[str, np.ndarray] = {}
    for result in results:
        for key, row in zip(result.keys, result.values, strict=True):
            current = rows.get(key)
            rows[key] = row if current is None else np.where(np.isnan(current), row, current)
    keys = sorted(rows)
    values = np.vstack([rows[k] for k in keys]) if keys else np.zeros((0, len(base.timestamps)))
    return FetchResult(keys, base.timestamps, values, base.step_ms)


class ShardedSource:
    """Every VHMS shard found in ZooKeeper under ``/artimon/vhms`` (any member of each), or
    the ``servers`` given as ``(host, port)``. The shard list is read again at most every
    ``refresh`` seconds, and while ZooKeeper is away the last one read is used, so queries
    go on during a ZooKeeper outage."""

    def __init__(
        self,
        zk_hosts: str | None = None,
        servers: list[tuple[str, int]] | None = None,
        timeout: float = 30.0,
        refresh: float = 2.0,
    ) -> None:
        self.timeout = timeout
        self.refresh = refresh
        self._static = servers
        self._known: list[tuple[str, int]] = []
        self._read_at = -math.inf
        self._known_lock = threading.Lock()
        self._opened: list[VhmsClient] = []  # every thread's connections, closed by close()
        self._zk = None
        if servers is None:
            connect, self._layout = resolve_zk(zk_hosts)
            self._zk = make_client(connect)
            self._zk.start(timeout=timeout)
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(8, thread_name_prefix="query-fanout")

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        with self._known_lock:
            for client in self._opened:
                client.close()
            self._opened.clear()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()

    def servers(self) -> list[tuple[str, int]]:
        if self._static is not None:
            return list(self._static)
        with self._known_lock:
            if (
                time.monotonic() - self._read_at >= self.refresh
                and self._zk is not None
                and self._zk.connected
            ):
                try:
                    self._known = self._read_servers(self._zk)
                    self._read_at = time.monotonic()
                except KazooException as exc:  # ZooKeeper went away mid-read: keep the last list
                    log.warning("keeping the last %d VHMS shards: %s", len(self._known), exc)
            return list(self._known)

    def _read_servers(self, zk: KazooClient) -> list[tuple[str, int]]:
        found = []
        try:
            shards = zk.get_children(f"{self._layout.root}/vhms")
        except NoNodeError:
            return []
        for shard in shards:
            try:
                members = sorted(zk.get_children(f"{self._layout.root}/vhms/{shard}"))
            except NoNodeError:
                continue
            if members:
                host, _, port = members[0].rpartition(":")
                found.append((host, int(port)))
        return found

    def _client(self, server: tuple[str, int]) -> VhmsClient:
        clients: dict[tuple[str, int], VhmsClient] = getattr(self._local, "clients", None) or {}
        self._local.clients = clients
        if server not in clients:
            clients[server] = VhmsClient(*server, timeout=self.timeout)
            with self._known_lock:
                self._opened.append(clients[server])
        return clients[server]

    def _each(self, method: str, *args: object) -> list[object]:
        servers = self.servers()
        return list(self._pool.map(lambda s: getattr(self._client(s), method)(*args), servers))

    def fetch(self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto") -> FetchResult:
        results: list[FetchResult] = self._each("fetch", selector, start_ms, end_ms, resolution)  # type: ignore[assignment]
        if not results:
            return FetchResult([], np.zeros(0, dtype=np.int64), np.zeros((0, 0)), 60_000)
        steps = {r.step_ms for r in results}
        if len(steps) > 1:  # shards picked different rings: read them all at the coarsest
            coarsest = max(steps) // 1000
            results = self._each("fetch", selector, start_ms, end_ms, coarsest)  # type: ignore[assignment]
        return merge(results)

    def series(self, selector: str) -> list[str]:
        return sorted({key for part in self._each("series", selector) for key in part})  # type: ignore[attr-defined]

    def label_names(self) -> list[str]:
        return sorted({key for part in self._each("label_names") for key in part})  # type: ignore[attr-defined]

    def label_values(self, label: str) -> list[str]:
        return sorted({key for part in self._each("label_values", label) for key in part})  # type: ignore[attr-defined]
