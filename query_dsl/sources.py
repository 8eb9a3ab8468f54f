"""Where ``fetch`` reads: an in-process store (the embedded stack, tests) or every VHMS shard
through VHMS's sharded client (registered in ZooKeeper, or listed), which fans the fetch
out and merges the shards' answers before map and reduce."""

from __future__ import annotations

import ssl
from typing import Protocol

from vhms import Address, FetchResult, ShardedClient
from vhms.server import Store

__all__ = ["DataSource", "ShardedSource", "StoreSource"]


class DataSource(Protocol):
    def fetch(
        self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto"
    ) -> FetchResult: ...
    def series(self, selector: str) -> list[str]: ...
    def label_names(self) -> list[str]: ...
    def label_values(self, label: str) -> list[str]: ...
    def strings(self, selector: str) -> dict[str, tuple[int, str]]: ...


class StoreSource:
    """Reads a store in this process."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def fetch(self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto") -> FetchResult:
        return self.store.fetch(selector, start_ms, end_ms, resolution)

    def fetch_samples(self, selector: str, start_ms: int, end_ms: int) -> FetchResult:
        """The buckets that may hold samples of ``[start_ms, end_ms)`` and, from the finest
        ring, each value's own time: for PromQL."""
        return self.store.fetch(selector, start_ms, end_ms, sample_times=True)

    def series(self, selector: str) -> list[str]:
        return self.store.series_keys(selector)

    def label_names(self) -> list[str]:
        return self.store.label_names()

    def label_values(self, label: str) -> list[str]:
        return self.store.label_values(label)

    def strings(self, selector: str) -> dict[str, tuple[int, str]]:
        return dict(sorted(self.store.last_strings(selector).items()))


class ShardedSource(ShardedClient):
    """Every VHMS shard found in ZooKeeper under ``/artimon/vhms`` (``zk_hosts``, default
    ``$ARTIMON_ZK``), or the ``servers`` given as ``(host, port)``, each a shard of its own.
    The shard list is watched, and kept while ZooKeeper is away, so queries go on during a
    ZooKeeper outage; a shard's replicas are read one at a time, the next one when a member
    fails (:class:`vhms.ShardedClient`). ``ssl_context`` speaks TLS to the shards."""

    def __init__(
        self,
        zk_hosts: str | None = None,
        servers: list[Address] | None = None,
        timeout: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(
            zk_hosts,
            servers=None if servers is None else {f"{host}:{port}": [(host, port)] for host, port in servers},
            timeout=timeout,
            ssl_context=ssl_context,
            name="query",
        )

    def fetch_samples(self, selector: str, start_ms: int, end_ms: int) -> FetchResult:
        """The buckets that may hold samples of ``[start_ms, end_ms)`` and, where every shard
        read its finest ring, each value's own time: for PromQL."""
        return self.fetch(selector, start_ms, end_ms, sample_times=True)
