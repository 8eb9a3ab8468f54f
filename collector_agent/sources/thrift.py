"""``thrift``: Apache Flume's ``ThriftSourceProtocol`` server (``append``/``appendBatch``).

Keys: ``protocol`` (``compact`` default, or ``binary``) and those of every RPC source
(:mod:`collector_agent.sources.rpc`: ``bind``, ``port``, ``threads``, the limits, TLS).

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

from bookkeeper.wire import FramedThriftServer
from collector_agent._flume_thrift import flume_thrift, protocol_factory
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException, RequestRefusedError
from collector_agent.flume_limits import check_request
from collector_agent.sources.rpc import RpcSource

__all__ = ["ThriftSource"]

log = logging.getLogger(__name__)
_OK: int = flume_thrift.Status.OK
_FAILED: int = flume_thrift.Status.FAILED
_ERROR: int = flume_thrift.Status.ERROR


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


class ThriftSource(RpcSource):
    def configure(self, context: Context) -> None:
        super().configure(context)
        self.protocol = protocol_factory(context)

    def _check(self, frame: bytearray) -> None:
        """Refuse, before decoding, a request that breaks Flume's IDL or a limit."""
        try:
            check_request(frame, isinstance(self.protocol, TCompactProtocolFactory), self.request_limits)
        except RequestRefusedError as exc:
            self.counters.add("EventReadFail")
            log.debug("thrift source %s: refused a request: %s", self.name, exc)
            raise

    def _server_for_start(self) -> FramedThriftServer:
        return FramedThriftServer(
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
