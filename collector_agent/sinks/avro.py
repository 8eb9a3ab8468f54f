"""``avro``: sends events to another agent (Apache Flume's or ours) with Flume's
``AvroSourceProtocol`` ``appendBatch``, as Flume's Avro sink (``NettyAvroRpcClient``) does.

Flume's keys: ``hostname`` (required), ``port`` (required), ``batch-size`` (default 100),
``connect-timeout`` (ms, default 20000), ``request-timeout`` (ms, default 20000),
``reset-connection-interval`` (s, default 0 = never: reconnect periodically to rebalance
behind a load balancer), ``compression-type`` (``none`` or ``deflate``, as the source says; not with ``ssl``),
``compression-level`` (1 to 9, default 6); TLS: ``ssl``, ``truststore`` and ours,
``keystore``, ``keystore-key``, ``keystore-password``, ``ssl-check-hostname``
(:mod:`collector_agent.tls`). Ours: ``maxFrameSize`` (bytes of an answer, default 1 MiB).

The first call on a connection carries the Avro handshake (our protocol's MD5; the text
too when the server answers ``NONE``). Any answer but ``OK``, a timeout or a broken
connection rolls the batch back into the channel and raises, so a failover processor moves
to the next sink; the connection is re-opened on the next batch.
"""

from __future__ import annotations

import io
import socket
import time

from collector_agent import avro_ipc
from collector_agent.avro_transport import FrameStream, deflate_setting
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import EventDeliveryException, RequestRefusedError
from collector_agent.sinks.base import BatchSink
from collector_agent.tls import client_ssl_context

__all__ = ["AvroSink"]


class AvroSink(BatchSink):
    counter_names = (*BatchSink.counter_names, "HandshakeMatchNoneCount")

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._stream: FrameStream | None = None
        self._handshaken = False
        self._serial = 0
        self._connected_at = 0.0

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.batch_size = context.get_int("batch-size", 100, minimum=1)
        self.hostname = context.get_str("hostname")
        self.port = context.get_int("port", minimum=1, maximum=65535)
        self.connect_timeout = context.get_int("connect-timeout", 20000, minimum=1) / 1000
        self.request_timeout = context.get_int("request-timeout", 20000, minimum=1) / 1000
        self.reset_interval = context.get_float("reset-connection-interval", 0.0, minimum=0.0)
        self.deflate = deflate_setting(context)
        self.level = context.get_int("compression-level", 6, minimum=1, maximum=9)
        self.max_frame_size = context.get_int("maxFrameSize", 1024 * 1024, minimum=64)
        self.ssl_context = client_ssl_context(context)
        self._disconnect()

    def stop(self) -> None:
        self._disconnect()
        super().stop()

    def _disconnect(self) -> None:
        if self._stream is not None:
            self._stream.sock.close()
            self._stream = None
            self.counters.add("ConnectionClosedCount")

    def _connection(self) -> FrameStream:
        stale = self.reset_interval and time.monotonic() - self._connected_at > self.reset_interval
        if self._stream is not None and stale:
            self._disconnect()
        if self._stream is None:
            try:
                sock = socket.create_connection((self.hostname, self.port), timeout=self.connect_timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.ssl_context is not None:
                    sock = self.ssl_context.wrap_socket(sock, server_hostname=self.hostname)
            except OSError as exc:
                self.counters.add("ConnectionFailedCount")
                raise EventDeliveryException(f"sink {self.name}: cannot connect: {exc}") from None
            self._stream = FrameStream(sock, deflate=self.deflate, level=self.level)
            self._handshaken = False
            self._connected_at = time.monotonic()
            self.counters.add("ConnectionCreatedCount")
        return self._stream

    def _call(self, stream: FrameStream, params: bytes, with_protocol: bool) -> str | None:
        """One ``appendBatch`` exchange: the status, or ``None`` when the server did not know
        our protocol's hash (the call is then repeated with its text)."""
        out = io.BytesIO()
        if not self._handshaken:
            avro_ipc.write_handshake_request(out, with_protocol=with_protocol)
        avro_ipc.write_call(out, "appendBatch", params)
        self._serial = (self._serial + 1) & 0x7FFFFFFF
        deadline = time.monotonic() + self.request_timeout
        stream.write(self._serial, out.getvalue(), deadline)
        serial, answer = stream.read(self.max_frame_size, deadline)
        if serial != self._serial:
            raise RequestRefusedError(f"an answer to request {serial}, not {self._serial}")
        reader = io.BytesIO(answer)
        if not self._handshaken:
            if avro_ipc.read_handshake_response(reader) == "NONE":
                if with_protocol:
                    raise RequestRefusedError("the server refused our protocol in the handshake")
                self.counters.add("HandshakeMatchNoneCount")
                return None
            self._handshaken = True
        return avro_ipc.read_response(reader)

    def deliver(self, events: list[Event]) -> None:
        stream = self._connection()
        params = avro_ipc.encode_events(events)
        try:
            status = self._call(stream, params, with_protocol=False)
            if status is None:
                status = self._call(stream, params, with_protocol=True)
        except (OSError, EOFError, ValueError) as exc:  # ValueError: RequestRefusedError, bad bytes
            self._disconnect()
            raise EventDeliveryException(f"sink {self.name}: appendBatch failed: {exc}") from None
        if status == "FAILED":
            raise EventDeliveryException(
                f"sink {self.name}: {self.hostname}:{self.port} answered FAILED (its channel is full)"
            )
        if status != "OK":
            self._disconnect()
            raise EventDeliveryException(f"sink {self.name}: {self.hostname}:{self.port} answered {status}")
