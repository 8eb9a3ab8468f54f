"""The formats Artimon's processes share, and the framed Thrift transport they speak.

- series identity: label rules, the canonical ``name{k=v,...}`` key, a batch's series keys,
  and :class:`IngestColumns` (samples as a store ingests them);
- the bookkeeper endpoint's Thrift IDL (``endpoint.thrift``) and framed Thrift over plain
  or TLS sockets with size, time and connection limits (:class:`FramedThriftServer` and its
  :class:`ServerLimits`, :class:`FramedClient`; :func:`server_context` and
  :func:`client_context` build the TLS contexts from PEM files);
- the Avro sample batch (``sample_batch.avsc``, event bodies) and the raw landing files
  (``landing_batch.avsc``);
- a uvicorn server in a thread (:class:`BackgroundServer`) and the address a server
  publishes (:func:`advertised_address`).
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
    parse_labels,
    parse_series,
    parse_series_shared,
    series_keys,
    validate_labels,
    validate_name,
)
from bookkeeper.wire.avro import SAMPLE_BATCH_SCHEMA, decode_sample_batch, encode_sample_batch
from bookkeeper.wire.client import FramedClient
from bookkeeper.wire.framed import (
    DEFAULT_MAX_FRAME_SIZE,
    FramedThriftServer,
    ServerLimits,
    call,
    read_frame,
    write_frame,
)
from bookkeeper.wire.httpserver import BackgroundServer
from bookkeeper.wire.landing import LANDING_SCHEMA, LandingWriter, encode_trailer, recover
from bookkeeper.wire.net import advertised_address
from bookkeeper.wire.tls import client_context, server_context

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "LANDING_SCHEMA",
    "MAX_LABELS",
    "MAX_LABEL_KEY_LENGTH",
    "MAX_LABEL_VALUE_LENGTH",
    "MAX_NAME_LENGTH",
    "PROTOCOL_VERSION",
    "SAMPLE_BATCH_SCHEMA",
    "BackgroundServer",
    "FramedClient",
    "FramedThriftServer",
    "IngestColumns",
    "LandingWriter",
    "ServerLimits",
    "advertised_address",
    "call",
    "client_context",
    "decode_sample_batch",
    "encode_sample_batch",
    "encode_trailer",
    "endpoint_thrift",
    "format_labels",
    "format_series",
    "parse_labels",
    "parse_series",
    "parse_series_shared",
    "read_frame",
    "recover",
    "series_keys",
    "server_context",
    "validate_labels",
    "validate_name",
    "write_frame",
]
