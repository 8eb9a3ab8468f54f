"""Where ``fetch`` reads: any :class:`DataSource`. VHMS is read through its client surface
only, one code path in process and over Thrift: :class:`vhms.LocalClient` over a store of
this process (the embedded stack, tests), or every VHMS shard through :class:`ShardedSource`
(VHMS's sharded client, shards registered in ZooKeeper or listed), which fans the fetch out
and merges the shards' answers before map and reduce. Other sources (Spark's Parquet
history, an Arrow table) answer the same calls."""

from __future__ import annotations

import ssl
from typing import Protocol

from vhms import Address, FetchResult, ShardedClient

__all__ = ["DataSource", "ShardedSource"]


class DataSource(Protocol):
    def fetch(
        self, selector: str, start_ms: int, end_ms: int, resolution: str | int = "auto"
    ) -> FetchResult: ...
    def series(self, selector: str) -> list[str]: ...
    def label_names(self) -> list[str]: ...
    def label_values(self, label: str) -> list[str]: ...
    def strings(self, selector: str) -> dict[str, tuple[int, str]]: ...


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
