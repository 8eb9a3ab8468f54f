"""``thrift``: sends events to another agent (ours or Apache Flume's) with Flume's
``ThriftSourceProtocol`` ``appendBatch``.

Keys: ``hostname`` (required), ``port`` (required), ``batch-size`` (Flume's name) or
``batchSize`` (every batch sink's; default 100, one of the two),
``connect-timeout`` (ms, default 20000), ``request-timeout`` (ms, default 20000),
``protocol`` (``compact`` default, or ``binary``), ``connection-reset-interval``
(s, default 0 = never: reconnect periodically to rebalance behind a load balancer),
``maxFrameSize`` (bytes of an answer, default 1 MiB); TLS: ``ssl``, ``truststore``,
``keystore``, ``keystore-key``, ``keystore-password``, ``ssl-check-hostname``
(:mod:`collector_agent.tls`; the certificate must name ``hostname``).

Any answer but ``OK`` (``FAILED``: the next hop's channel is full; ``ERROR``), a timeout or a
broken connection rolls the batch back into the channel and raises, as Flume's sink does, so
a failover processor moves to the next sink; a broken connection is re-opened on the next
batch.
"""

from __future__ import annotations

import time

from bookkeeper import WireError
from bookkeeper.wire import FramedClient
from collector_agent._flume_thrift import flume_thrift, protocol_factory
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import EventDeliveryException
from collector_agent.sinks.base import BatchSink
from collector_agent.tls import client_ssl_context

__all__ = ["ThriftSink"]


class ThriftSink(BatchSink):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._client: FramedClient | None = None
        self._connected_at = 0.0

    def configure(self, context: Context) -> None:
        super().configure(context)
        if context.get_optional("batch-size") is not None:
            if context.get_optional("batchSize") is not None:
                raise context.error("batch-size", "and batchSize both set: say one")
            self.batch_size = context.get_int("batch-size", minimum=1)
        self.hostname = context.get_str("hostname")
        self.port = context.get_int("port", minimum=1, maximum=65535)
        self.connect_timeout = context.get_int("connect-timeout", 20000, minimum=1) / 1000
        self.request_timeout = context.get_int("request-timeout", 20000, minimum=1) / 1000
        self.protocol = protocol_factory(context)
        self.reset_interval = context.get_float("connection-reset-interval", 0.0, minimum=0.0)
        self.max_frame_size = context.get_int("maxFrameSize", 1024 * 1024, minimum=64)
        self._disconnect()
        self._client = FramedClient(
            self.hostname,
            self.port,
            flume_thrift.ThriftSourceProtocol,
            protocol_factory=self.protocol,
            connect_timeout=self.connect_timeout,
            timeout=self.request_timeout,
            max_frame_size=self.max_frame_size,
            ssl_context=client_ssl_context(context),
        )

    def stop(self) -> None:
        self._disconnect()
        super().stop()

    def _disconnect(self) -> None:
        if self._client is not None and self._client.is_open:
            self._client.close()
            self.counters.add("ConnectionClosedCount")

    def _connection(self) -> FramedClient:
        client = self._client
        assert client is not None  # configure() made it
        if (
            client.is_open
            and self.reset_interval
            and time.monotonic() - self._connected_at > self.reset_interval
        ):
            self._disconnect()
        try:
            opened = client.connect()
        except WireError as exc:
            self.counters.add("ConnectionFailedCount")
            raise EventDeliveryException(f"sink {self.name}: cannot connect: {exc}") from None
        if opened:
            self._connected_at = time.monotonic()
            self.counters.add("ConnectionCreatedCount")
        return client

    def deliver(self, events: list[Event]) -> None:
        client = self._connection()
        batch = [flume_thrift.ThriftFlumeEvent(headers=e.headers, body=e.body) for e in events]
        try:
            status = client.call("appendBatch", batch)
        except WireError as exc:
            self.counters.add("ConnectionClosedCount")
            raise EventDeliveryException(f"sink {self.name}: appendBatch failed: {exc}") from None
        if status == flume_thrift.Status.FAILED:
            raise EventDeliveryException(
                f"sink {self.name}: {self.hostname}:{self.port} answered FAILED (its channel is full)"
            )
        if status != flume_thrift.Status.OK:
            self._disconnect()
            raise EventDeliveryException(f"sink {self.name}: {self.hostname}:{self.port} answered {status}")
