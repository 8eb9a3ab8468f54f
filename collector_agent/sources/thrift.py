"""``thrift``: Apache Flume's ``ThriftSourceProtocol`` server (``append``/``appendBatch``).

Keys: ``protocol`` (``compact`` default, or ``binary``) and those of every RPC source
(:mod:`collector_agent.sources.rpc`: ``bind``, ``port``, ``threads``, the limits, TLS).

Each request frame is checked before it is decoded (:mod:`collector_agent.flume_limits`),
or, in the compact protocol, read in one pass that charges the same limits
(:mod:`collector_agent.flume_compact`: the ``append``/``appendBatch`` of every Thrift
writer; any other request takes the check and thriftpy2's decoder). One that breaks
Flume's IDL (an event without ``headers`` or ``body``) or a limit (events per batch,
decoded bytes) is answered a Thrift ``PROTOCOL_ERROR`` naming why and its
connection closed. Otherwise it answers ``OK`` once the events are committed in every
required channel, ``FAILED`` when a channel refused them (full: the client retries later),
``ERROR`` on anything else. A client that sends garbage or an oversized frame loses its
connection; nothing else does. The server's counters (refused requests, bad frames,
connections closed by each limit) join the source's in ``/metrics``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from thriftpy2.protocol import TCompactProtocolFactory

from bookkeeper.wire import FramedThriftServer
from collector_agent._flume_thrift import flume_thrift, protocol_factory
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException, RequestRefusedError
from collector_agent.flume_compact import read_call
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
        return self.call("append", [event])

    def appendBatch(self, events: list[Any]) -> int:
        return self.call("appendBatch", events or [])

    def call(self, api: str, thrift_events: list[Any]) -> int:
        """``append`` or ``appendBatch`` of events thriftpy2 decoded."""
        try:
            events = [Event(dict(e.headers or {}), bytes(e.body or b"")) for e in thrift_events]
        except (TypeError, ValueError, AttributeError):
            self._received(api, len(thrift_events))
            self.source.counters.add("EventReadFail")
            return _ERROR
        return self.deliver(api, events)

    def deliver(self, api: str, events: list[Event]) -> int:
        """``append`` or ``appendBatch`` of ``events``: the answer's status."""
        name = self._received(api, len(events))
        status = self._deliver(events)
        if status == _OK:
            self.source.counters.add(f"{name}AcceptedCount")
        return status

    def _received(self, api: str, count: int) -> str:
        name = "AppendBatch" if api == "appendBatch" else "Append"
        self.source.counters.add(f"{name}ReceivedCount")
        self.source.counters.add("EventReceivedCount", count)
        return name

    def _deliver(self, events: list[Event]) -> int:
        source = self.source
        counters = source.counters
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
        self.compact = isinstance(self.protocol, TCompactProtocolFactory)
        self._handler = _Handler(self)

    def _read_call(self, frame: bytearray) -> tuple[str, int, Callable[[], int]] | None:
        """A compact request of the regular layout, decoded in one pass (``flume_compact``)."""
        call = read_call(frame, self.request_limits) if self.compact else None
        if call is None:
            return None
        api, seqid, events = call
        return api, seqid, partial(self._handler.deliver, api, events)

    def _check(self, frame: bytearray) -> None:
        """Refuse, before decoding, a request that breaks Flume's IDL or a limit."""
        try:
            check_request(frame, self.compact, self.request_limits)
        except RequestRefusedError as exc:
            self.counters.add("EventReadFail")
            log.debug("thrift source %s: refused a request: %s", self.name, exc)
            raise

    def _server_for_start(self) -> FramedThriftServer:
        return FramedThriftServer(
            flume_thrift.ThriftSourceProtocol,
            self._handler,
            self.bind,
            self.requested_port,
            protocol_factory=self.protocol,
            limits=self.limits,
            ssl_context=self.ssl_context,
            check_request=self._check,
            read_call=self._read_call,
            name=f"thrift-source[{self.name}]",
        )
