"""``thrift``: Apache Flume's ``ThriftSourceProtocol`` server (``append``/``appendBatch``).

Keys: ``bind`` (required, as in Flume: there is no all-interfaces default; ``0.0.0.0`` only
when written), ``port`` (required, 0 = ephemeral), ``protocol`` (``compact``
default, or ``binary``), ``threads`` (most concurrent connections, default 64),
``maxConnectionsPerPeer`` (default 16), ``maxFrameSize`` (bytes, default 16 MiB),
``maxBatchEvents`` (default 10000), ``maxDecodedBytes`` (default 64 MiB),
``firstFrameTimeout`` (s, default 10), ``idleTimeout`` (s, default 300), ``frameTimeout``
(s, default 30); TLS: ``ssl``, ``keystore``, ``keystore-key``, ``keystore-password``,
``truststore`` (:mod:`collector_agent.tls`).

Each request frame is checked before it is decoded (:mod:`collector_agent.flume_limits`):
one that breaks Flume's IDL (an event without ``headers`` or ``body``) or a limit (events
per batch, decoded bytes) is answered a Thrift ``PROTOCOL_ERROR`` naming why and its
connection closed. Otherwise it answers ``OK`` once the events are committed in every
required channel, ``FAILED`` when a channel refused them (full: the client retries later),
``ERROR`` on anything else. A client that sends garbage or an oversized frame loses its
connection; nothing else does. The server's counters (refused requests, bad frames,
connections closed by each limit) join the source's in ``/metrics``.
"""

from __future__ import annotations

import logging
from typing import Any

from thriftpy2.protocol import TCompactProtocolFactory

from bookkeeper.wire import FramedThriftServer, ServerLimits
from collector_agent._flume_thrift import flume_thrift, protocol_factory
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException, RequestRefusedError
from collector_agent.flume_limits import RequestLimits, check_request
from collector_agent.sources.base import EventDrivenSource
from collector_agent.tls import server_ssl_context

__all__ = ["ThriftSource"]

log = logging.getLogger(__name__)
_OK: int = flume_thrift.Status.OK
_FAILED: int = flume_thrift.Status.FAILED
_ERROR: int = flume_thrift.Status.ERROR

# The server's counters (bookkeeper.wire.FramedThriftServer.stats) by their /metrics name.
_SERVER_COUNTERS = {
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


class _Handler:
    def __init__(self, source: ThriftSource) -> None:
        self.source = source

    def append(self, event: Any) -> int:
        counters = self.source.counters
        counters.add("AppendReceivedCount")
        status = self._deliver([event])
        if status == _OK:
            counters.add("AppendAcceptedCount")
        return status

    def appendBatch(self, events: list[Any]) -> int:
        counters = self.source.counters
        counters.add("AppendBatchReceivedCount")
        status = self._deliver(events or [])
        if status == _OK:
            counters.add("AppendBatchAcceptedCount")
        return status

    def _deliver(self, thrift_events: list[Any]) -> int:
        source = self.source
        counters = source.counters
        counters.add("EventReceivedCount", len(thrift_events))
        try:
            events = [Event(dict(e.headers or {}), bytes(e.body or b"")) for e in thrift_events]
        except (TypeError, ValueError, AttributeError):
            counters.add("EventReadFail")
            return _ERROR
        try:
            source.channel_processor.process_batch(events)
        except ChannelException as exc:
            counters.add("ChannelWriteFail")
            log.debug("thrift source %s: channel refused %d events: %s", source.name, len(events), exc)
            return _FAILED
        except Exception:
            counters.add("GenericProcessingFail")
            log.exception("thrift source %s: processing failed", source.name)
            return _ERROR
        counters.add("EventAcceptedCount", len(events))
        return _OK


class ThriftSource(EventDrivenSource):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._server: FramedThriftServer | None = None
        self.port = 0

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.bind = context.get_str("bind")
        self.requested_port = context.get_int("port", minimum=0, maximum=65535)
        self.protocol = protocol_factory(context)
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

    def _check(self, frame: bytearray) -> None:
        """Refuse, before decoding, a request that breaks Flume's IDL or a limit."""
        try:
            check_request(frame, isinstance(self.protocol, TCompactProtocolFactory), self.request_limits)
        except RequestRefusedError as exc:
            self.counters.add("EventReadFail")
            log.debug("thrift source %s: refused a request: %s", self.name, exc)
            raise

    def start(self) -> None:
        self._server = FramedThriftServer(
            flume_thrift.ThriftSourceProtocol,
            _Handler(self),
            self.bind,
            self.requested_port,
            protocol_factory=self.protocol,
            limits=self.limits,
            ssl_context=self.ssl_context,
            check_request=self._check,
            name=f"thrift-source[{self.name}]",
        )
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
        values.update(dict.fromkeys(_SERVER_COUNTERS.values(), 0))
        if self._server is not None:
            values["OpenConnectionCount"] = self._server.open_connections
            for stat, count in self._server.stats.items():
                if stat in _SERVER_COUNTERS:
                    values[_SERVER_COUNTERS[stat]] += count
        return values
