"""``avro``: Apache Flume's Avro source, a ``NettyServer`` of ``AvroSourceProtocol``
(``append``/``appendBatch``) that Flume's ``avro`` sink and ``RpcClient`` talk to.

Flume's keys: ``bind`` (required), ``port`` (required, 0 = ephemeral), ``threads`` (most
concurrent connections, default 64; Flume's 0 = unbounded is refused), ``compression-type``
(``none`` or ``deflate``: the client must say the same; not with ``ssl``), ``ipFilter`` with
``ipFilterRules`` (``allow:ip:127.*,deny:ip:*``: the first rule whose glob matches the
peer's address decides, no match allows; Flume's ``name:`` rules are refused), TLS
(``ssl``, ``keystore``, ``keystore-password``, ``keystore-type``: PEM files). The limits,
deadlines and TLS keys are every RPC source's (:mod:`collector_agent.sources.rpc`).

``appendBatch`` answers ``OK`` once its events are committed in every required channel,
``FAILED`` when a channel refused them (full: the client retries), a system error on
anything else; limits and garbage as :mod:`collector_agent.avro_server` says.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable
from typing import ClassVar

from collector_agent.avro_server import AvroServer
from collector_agent.avro_transport import deflate_setting
from collector_agent.context import Context
from collector_agent.event import Event
from collector_agent.exceptions import ChannelException
from collector_agent.sources.rpc import SERVER_COUNTERS, RpcSource

__all__ = ["AvroSource"]

log = logging.getLogger(__name__)

# The Avro server's own counters by their /metrics name (beside every RPC server's).
_SERVER_COUNTERS = {
    **SERVER_COUNTERS,
    "filtered": "ConnectionFilteredCount",
    "handshakes_both": "HandshakeMatchBothCount",
    "handshakes_client": "HandshakeMatchClientCount",
    "handshakes_none": "HandshakeMatchNoneCount",
}


def ip_filter(context: Context) -> Callable[[str], bool] | None:
    """``ipFilter``/``ipFilterRules`` as a predicate on a peer's address (``None``: off)."""
    if not context.get_bool("ipFilter", False):
        return None
    rules: list[tuple[bool, str]] = []
    for rule in filter(None, (r.strip() for r in context.get_str("ipFilterRules", "").split(","))):
        verdict, _, rest = rule.partition(":")
        kind, _, pattern = rest.partition(":")
        if verdict not in ("allow", "deny") or kind != "ip" or not pattern:
            raise context.error("ipFilterRules", f"{rule!r} is not allow:ip:<glob> or deny:ip:<glob>")
        rules.append((verdict == "allow", pattern))
    if not rules:
        raise context.error("ipFilterRules", "ipFilter is true but no rule is given")

    def allow(peer: str) -> bool:
        return next((verdict for verdict, pattern in rules if fnmatch.fnmatchcase(peer, pattern)), True)

    return allow


class AvroSource(RpcSource):
    server_counters: ClassVar[dict[str, str]] = _SERVER_COUNTERS

    def configure(self, context: Context) -> None:
        super().configure(context)
        self.deflate = deflate_setting(context)
        self.allow = ip_filter(context)

    def _deliver(self, name: str, events: list[Event]) -> str:
        counters = self.counters
        counters.add("AppendBatchReceivedCount" if name == "appendBatch" else "AppendReceivedCount")
        counters.add("EventReceivedCount", len(events))
        try:
            self.channel_processor.process_batch(events)
        except ChannelException as exc:
            counters.add("ChannelWriteFail")
            log.debug("avro source %s: channel refused %d events: %s", self.name, len(events), exc)
            return "FAILED"
        except Exception:
            counters.add("GenericProcessingFail")
            log.exception("avro source %s: processing failed", self.name)
            raise
        counters.add("AppendBatchAcceptedCount" if name == "appendBatch" else "AppendAcceptedCount")
        counters.add("EventAcceptedCount", len(events))
        return "OK"

    def _server_for_start(self) -> AvroServer:
        return AvroServer(
            self._deliver,
            self.bind,
            self.requested_port,
            limits=self.limits,
            request_limits=self.request_limits,
            deflate=self.deflate,
            ssl_context=self.ssl_context,
            allow=self.allow,
            name=f"avro-source[{self.name}]",
        )
