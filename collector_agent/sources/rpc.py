"""What Flume's RPC sources (``thrift``, ``avro``) share: a server on ``bind``:``port`` with
a thread per connection under the same limits, its counters joined to the source's.

Keys of both: ``bind`` (required, as in Flume: there is no all-interfaces default;
``0.0.0.0`` only when written), ``port`` (required, 0 = ephemeral), ``threads`` (most
concurrent connections, default 64), ``maxConnectionsPerPeer`` (default 16),
``maxFrameSize`` (bytes, default 16 MiB), ``maxBatchEvents`` (default 10000),
``maxDecodedBytes`` (default 64 MiB), ``firstFrameTimeout`` (s, default 10),
``idleTimeout`` (s, default 300), ``frameTimeout`` (s, default 30); TLS: ``ssl``,
``keystore``, ``keystore-key``, ``keystore-password``, ``truststore``
(:mod:`collector_agent.tls`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Protocol

from bookkeeper.wire import ServerLimits
from collector_agent.context import Context
from collector_agent.flume_limits import RequestLimits
from collector_agent.sources.base import EventDrivenSource
from collector_agent.tls import server_ssl_context

__all__ = ["SERVER_COUNTERS", "RpcServer", "RpcSource"]

# What every RPC server counts (bookkeeper.wire.ConnectionServer.stats), by /metrics name.
SERVER_COUNTERS = {
    "bad_frames": "BadFrameCount",
    "refused_requests": "RequestRefusedCount",
    "connections_refused": "ConnectionRefusedCount",
    "evicted_full": "ConnectionEvictedCount",
    "evicted_peer_limit": "ConnectionEvictedCount",
    "silent_closed": "SilentConnectionClosedCount",
    "idle_closed": "IdleConnectionClosedCount",
    "slow_frames": "SlowFrameCount",
    "slow_readers": "SlowReaderCount",
    "tls_failures": "TlsFailureCount",
}


class RpcServer(Protocol):
    """What an RPC source needs of its server."""

    @property
    def port(self) -> int: ...

    @property
    def stats(self) -> Mapping[str, int]: ...

    @property
    def open_connections(self) -> int: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class RpcSource(EventDrivenSource):
    """A source serving an RPC protocol (see the module doc): a subclass builds its server in
    ``_server_for_start()``; ``server_counters`` names the server's counters it reports
    (server stat -> ``/metrics`` name; several stats may add to one)."""

    server_counters: ClassVar[dict[str, str]] = SERVER_COUNTERS

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._server: RpcServer | None = None
        self.port = 0

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.bind = context.get_str("bind")
        self.requested_port = context.get_int("port", minimum=0, maximum=65535)
        self.limits = ServerLimits(
            max_frame_size=context.get_int("maxFrameSize", 16 * 1024 * 1024, minimum=1024),
            max_connections=context.get_int("threads", 64, minimum=1),
            max_connections_per_peer=context.get_int("maxConnectionsPerPeer", 16, minimum=1),
            first_frame_timeout=context.get_float("firstFrameTimeout", 10.0, minimum=0.1),
            idle_timeout=context.get_float("idleTimeout", 300.0, minimum=0.1),
            frame_timeout=context.get_float("frameTimeout", 30.0, minimum=0.1),
        )
        self.request_limits = RequestLimits(
            max_batch_events=context.get_int("maxBatchEvents", 10_000, minimum=1),
            max_decoded_bytes=context.get_int("maxDecodedBytes", 64 * 1024 * 1024, minimum=1024),
        )
        self.ssl_context = server_ssl_context(context)

    def _server_for_start(self) -> RpcServer:
        raise NotImplementedError

    def start(self) -> None:
        self._server = self._server_for_start()
        self.port = self._server.port
        self._server.start()
        super().start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        super().stop()

    def metrics(self) -> dict[str, float]:
        values = self.counters.snapshot()
        values.update(dict.fromkeys(self.server_counters.values(), 0))
        if self._server is not None:
            values["OpenConnectionCount"] = self._server.open_connections
            for stat, count in self._server.stats.items():
                if stat in self.server_counters:
                    values[self.server_counters[stat]] += count
        return values
