"""The bookkeeper endpoint's transport, and the series identity every Artimon process shares.

- series identity: label rules, the canonical ``name{k=v,...}`` key, a batch's series keys,
  and :class:`IngestColumns` (samples as a store ingests them);
- the bookkeeper endpoint's Thrift IDL (``endpoint.thrift``) and framed Thrift over plain
  or TLS sockets with size, time and connection limits (:class:`FramedThriftServer` and its
  :class:`ServerLimits`; its base, :class:`ConnectionServer`, accepting, making room,
  TLS and deadlines for any framed protocol, with its :class:`Connection` and their
  :class:`ConnectionState`, which the collector agent's Avro server shares;
  :class:`FramedClient`; :func:`server_context` and
  :func:`client_context` build the TLS contexts from PEM files);
- the address a server publishes (:func:`advertised_address`).

The Avro sample batch, the landing files and the HTTP server in a thread are the platform's
(:mod:`bookkeeper.ground`): an application serving its variables needs none of them.
"""

from __future__ import annotations

from bookkeeper._thrift import PROTOCOL_VERSION, endpoint_thrift
from bookkeeper.batch import IngestColumns
from bookkeeper.labels import (
    MAX_LABEL_KEY_LENGTH,
    MAX_LABEL_VALUE_LENGTH,
    MAX_LABELS,
    MAX_NAME_LENGTH,
    format_labels,
    format_series,
    merged_label_texts,
    parse_labels,
    parse_series,
    parse_series_shared,
    series_keys,
    validate_labels,
    validate_name,
)
from bookkeeper.wire.client import FramedClient
from bookkeeper.wire.connection_server import ConnectionServer
from bookkeeper.wire.connections import Connection, ConnectionState
from bookkeeper.wire.frames import DEFAULT_MAX_FRAME_SIZE, call, read_frame, write_frame
from bookkeeper.wire.net import advertised_address
from bookkeeper.wire.thrift_server import FramedThriftServer, ServerLimits
from bookkeeper.wire.tls import client_context, server_context

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "MAX_LABELS",
    "MAX_LABEL_KEY_LENGTH",
    "MAX_LABEL_VALUE_LENGTH",
    "MAX_NAME_LENGTH",
    "PROTOCOL_VERSION",
    "Connection",
    "ConnectionServer",
    "ConnectionState",
    "FramedClient",
    "FramedThriftServer",
    "IngestColumns",
    "ServerLimits",
    "advertised_address",
    "call",
    "client_context",
    "endpoint_thrift",
    "format_labels",
    "format_series",
    "merged_label_texts",
    "parse_labels",
    "parse_series",
    "parse_series_shared",
    "read_frame",
    "series_keys",
    "server_context",
    "validate_labels",
    "validate_name",
    "write_frame",
]
