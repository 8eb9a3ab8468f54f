"""``thrift``: sends events to another agent (ours or Apache Flume's) with Flume's
``ThriftSourceProtocol`` ``appendBatch``.

Keys: ``hostname`` (required), ``port`` (required), ``batchSize`` (default 100),
``connect-timeout`` (ms, default 20000), ``request-timeout`` (ms, default 20000),
``protocol`` (``compact`` default, or ``binary``), ``connection-reset-interval``
(s, default 0 = never: reconnect periodically to rebalance behind a load balancer),
``maxFrameSize`` (bytes of an answer, default 1 MiB).

Any answer but ``OK`` (``FAILED``: the next hop's channel is full; ``ERROR``), a timeout or a
broken connection rolls the batch back into the channel and raises, as Flume's sink does, so
a failover processor moves to the next sink; a broken connection is re-opened on the next
batch.
"""

from __future__ import annotations

import socket
import time

from bookkeeper.exceptions import WireError
from bookkeeper.framed import call
from collector_agent._flume_thrift import flume_thrift, protocol_factory
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import EventDeliveryException
from collector_agent.sinks.base import BatchSink

__all__ = ["ThriftSink"]


class ThriftSink(BatchSink):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._sock: socket.socket | None = None
        self._connected_at = 0.0
        self._seqid = 0

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.hostname = context.get_str("hostname")
        self.port = context.get_int("port", minimum=1, maximum=65535)
        self.connect_timeout = context.get_int("connect-timeout", 20000, minimum=1) / 1000
        self.request_timeout = context.get_int("request-timeout", 20000, minimum=1) / 1000
        self.protocol = protocol_factory(context)
        self.reset_interval = context.get_float("connection-reset-interval", 0.0, minimum=0.0)
        self.max_frame_size = context.get_int("maxFrameSize", 1024 * 1024, minimum=64)

    def stop(self) -> None:
        self._disconnect()
        super().stop()

    def _disconnect(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self.counters.add("ConnectionClosedCount")

    def _connection(self) -> socket.socket:
        if (
            self._sock is not None
            and self.reset_interval
            and (time.monotonic() - self._connected_at > self.reset_interval)
        ):
            self._disconnect()
        if self._sock is None:
            try:
                sock = socket.create_connection((self.hostname, self.port), timeout=self.connect_timeout)
            except OSError as exc:
                self.counters.add("ConnectionFailedCount")
                raise EventDeliveryException(
                    f"sink {self.name}: cannot connect to {self.hostname}:{self.port}: {exc}"
                ) from None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
            self._connected_at = time.monotonic()
            self.counters.add("ConnectionCreatedCount")
        return self._sock

    def deliver(self, events: list[Event]) -> None:
        sock = self._connection()
        batch = [flume_thrift.ThriftFlumeEvent(headers=e.headers, body=e.body) for e in events]
        self._seqid = (self._seqid + 1) & 0x7FFFFFFF
        try:
            sock.settimeout(self.request_timeout)
            status = call(
                sock,
                flume_thrift.ThriftSourceProtocol,
                "appendBatch",
                batch,
                protocol_factory=self.protocol,
                max_frame_size=self.max_frame_size,
                seqid=self._seqid,
                deadline=time.monotonic() + self.request_timeout,
            )
        except WireError as exc:
            self._disconnect()
            raise EventDeliveryException(f"sink {self.name}: appendBatch failed: {exc}") from None
        if status == flume_thrift.Status.FAILED:
            raise EventDeliveryException(
                f"sink {self.name}: {self.hostname}:{self.port} answered FAILED (its channel is full)"
            )
        if status != flume_thrift.Status.OK:
            self._disconnect()
            raise EventDeliveryException(f"sink {self.name}: {self.hostname}:{self.port} answered {status}")
