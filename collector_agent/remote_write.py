"""Prometheus remote write 1.0: the ``WriteRequest`` message and its decoding into a sample batch.

The body of ``POST /api/v1/write`` is a ``prometheus.WriteRequest`` (Prometheus's
``prompb/remote.proto`` and ``types.proto``) in protobuf, compressed with snappy's block
format ("raw", no framing). The messages are built here with protobuf's descriptor API
from the fields of those two files (no generated code to keep in step, no hand-written
decoder): the protobuf runtime decodes, cramjam's snappy decompresses.

Fields kept: ``TimeSeries.labels`` and ``TimeSeries.samples`` (value, epoch-ms time).
Fields read and not kept, each counted by the source: ``metadata`` (HELP/TYPE of the
families), ``exemplars``, native ``histograms`` (a remote-write 1.1 extension: the series
is refused, Artimon has no histogram type).

How a series maps onto Artimon's data model:

- ``__name__`` is the variable's name; every other label is a label as written. A label
  with an empty value is dropped (in Prometheus an empty value means "no such label").
- every sample becomes a DOUBLE row with its own timestamp; Prometheus's staleness marker
  (a NaN with a special payload) is a NaN like any other, its bits kept.

Refused, each with a :class:`WriteRequestError` naming the reason (the request as a whole):
a body that is not snappy, a decompressed size above ``max_decoded_bytes`` (read from
snappy's header before decompressing), a body that is not a ``WriteRequest``, more than
``max_samples`` samples. Refused series by series (the rest of the request is kept; the
reasons come back in :attr:`DecodedWrite.refused`): no ``__name__``, a name or label that
breaks Artimon's rules (``bookkeeper.wire.validate_name``/``validate_labels``: characters,
lengths, at most 32 labels), a native histogram.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import cramjam
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from bookkeeper import BookkeeperError, SampleBatch, VarType
from bookkeeper.wire import format_labels, validate_labels, validate_name
from collector_agent.exceptions import WriteRequestError

__all__ = ["NAME_LABEL", "DecodedWrite", "WriteLimits", "decode_write_request", "messages"]

NAME_LABEL = "__name__"
_SERIES_CACHE = 100_000  # distinct series whose checked key is remembered (about 30 MB at most)

_F = descriptor_pb2.FieldDescriptorProto
# (message, [(field, number, type, label, message type)]) as in prompb/types.proto and remote.proto
_MESSAGES: list[tuple[str, list[tuple[str, int, int, int, str]]]] = [
    (
        "Label",
        [
            ("name", 1, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
            ("value", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ],
    ),
    (
        "Sample",
        [
            ("value", 1, _F.TYPE_DOUBLE, _F.LABEL_OPTIONAL, ""),
            ("timestamp", 2, _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
        ],
    ),
    (
        "Exemplar",
        [
            ("labels", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.Label"),
            ("value", 2, _F.TYPE_DOUBLE, _F.LABEL_OPTIONAL, ""),
            ("timestamp", 3, _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
        ],
    ),
    # a native histogram's fields are not read: its presence is what matters (the series is refused)
    ("Histogram", [("timestamp", 15, _F.TYPE_INT64, _F.LABEL_OPTIONAL, "")]),
    (
        "TimeSeries",
        [
            ("labels", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.Label"),
            ("samples", 2, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.Sample"),
            ("exemplars", 3, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.Exemplar"),
            ("histograms", 4, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.Histogram"),
        ],
    ),
    (
        "MetricMetadata",
        [
            ("type", 1, _F.TYPE_INT32, _F.LABEL_OPTIONAL, ""),
            ("metric_family_name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
            ("help", 4, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
            ("unit", 5, _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
        ],
    ),
    (
        "WriteRequest",
        [
            ("timeseries", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.TimeSeries"),
            ("metadata", 3, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.MetricMetadata"),
        ],
    ),
    # The decoding view of the same bytes: a label, an exemplar, a histogram, a metadata entry
    # kept as its encoded bytes (protobuf reads a sub-message field as bytes just as well), so
    # a series' labels come out as one tuple of bytes, the key of the cache of checked series,
    # and are decoded as Labels only the first time they are seen (3x faster per request).
    (
        "TimeSeriesView",
        [
            ("labels", 1, _F.TYPE_BYTES, _F.LABEL_REPEATED, ""),
            ("samples", 2, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.Sample"),
            ("exemplars", 3, _F.TYPE_BYTES, _F.LABEL_REPEATED, ""),
            ("histograms", 4, _F.TYPE_BYTES, _F.LABEL_REPEATED, ""),
        ],
    ),
    (
        "WriteRequestView",
        [
            ("timeseries", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".prometheus.TimeSeriesView"),
            ("metadata", 3, _F.TYPE_BYTES, _F.LABEL_REPEATED, ""),
        ],
    ),
]


def _build_messages() -> dict[str, Any]:
    """The message classes, in a pool of their own (the default pool may hold another
    ``prometheus`` package, e.g. from a generated module)."""
    proto = descriptor_pb2.FileDescriptorProto(name="artimon/prometheus_remote.proto", package="prometheus")
    proto.syntax = "proto3"
    for message_name, fields in _MESSAGES:
        message = proto.message_type.add(name=message_name)
        for field_name, number, kind, label, type_name in fields:
            added = message.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                added.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"prometheus.{name}"))
        for name, _ in _MESSAGES
    }


messages: dict[str, Any] = _build_messages()
"""The protobuf classes by message name (``messages["WriteRequest"]()`` builds one)."""


@dataclass(frozen=True)
class WriteLimits:
    """What one request may hold once decompressed: bytes, and samples over all its series."""

    max_decoded_bytes: int = 64 * 1024 * 1024
    max_samples: int = 1_000_000


@dataclass
class DecodedWrite:
    """A decoded request: the samples Artimon keeps as one batch, and what it did not keep."""

    batch: SampleBatch
    series: int
    refused: list[str] = field(default_factory=list)
    refused_samples: int = 0
    metadata: int = 0
    exemplars: int = 0


def _decompress(body: bytes, limits: WriteLimits) -> bytes:
    try:
        size = cramjam.snappy.decompress_raw_len(body)
    except cramjam.DecompressionError as exc:
        raise WriteRequestError(f"the body is not snappy-compressed (block format): {exc}") from None
    if size > limits.max_decoded_bytes:
        raise WriteRequestError(
            f"the body decompresses to {size:,} bytes, more than maxDecodedBytes={limits.max_decoded_bytes:,}"
        )
    try:
        return bytes(cramjam.snappy.decompress_raw(body))
    except cramjam.DecompressionError as exc:
        raise WriteRequestError(f"the body is not snappy-compressed (block format): {exc}") from None


@lru_cache(maxsize=_SERIES_CACHE)
def _series_key(encoded_labels: tuple[bytes, ...]) -> tuple[str, str]:
    """The name and the canonical label set of one series' encoded ``Label`` messages,
    checked once per distinct series (a Prometheus sends the same ones request after
    request); ``ValueError`` (a bookkeeper one for a name or label that breaks the rules)
    naming what is wrong, ``DecodeError`` for bytes that are not a ``Label``."""
    label_type = messages["Label"]
    pairs = [(label.name, label.value) for label in map(label_type.FromString, encoded_labels)]
    labels = {name: value for name, value in pairs if value}
    name = labels.pop(NAME_LABEL, None)
    if name is None:
        raise ValueError(f"a series without {NAME_LABEL}: {labels}")
    if len(pairs) != len({label for label, _ in pairs}):
        raise ValueError(f"series {name!r} repeats a label name")
    return validate_name(name), format_labels(validate_labels(labels))


def decode_write_request(body: bytes, context: str, limits: WriteLimits | None = None) -> DecodedWrite:
    """Decode a snappy-compressed ``WriteRequest`` into one batch of context ``context``
    (see the module doc for the mapping and every refusal)."""
    limits = limits or WriteLimits()
    request = messages["WriteRequestView"]()
    try:
        request.ParseFromString(_decompress(body, limits))
    except DecodeError as exc:
        raise WriteRequestError(f"the body is not a prometheus.WriteRequest: {exc}") from None
    total = sum(len(series.samples) for series in request.timeseries)
    if total > limits.max_samples:
        raise WriteRequestError(
            f"the request holds {total:,} samples, more than maxSamples={limits.max_samples:,}"
        )
    names: dict[str, int] = {}
    label_sets: dict[str, int] = {}
    name_ids: list[int] = []
    set_ids: list[int] = []
    values: list[float] = []
    timestamps: list[int] = []
    decoded = DecodedWrite(
        SampleBatch.from_samples(context, []), len(request.timeseries), metadata=len(request.metadata)
    )
    for series in request.timeseries:
        decoded.exemplars += len(series.exemplars)
        try:
            if len(series.histograms):
                raise ValueError("native histograms are not supported")
            name, label_set = _series_key(tuple(series.labels))
        except DecodeError as exc:
            raise WriteRequestError(f"the body is not a prometheus.WriteRequest: a label: {exc}") from None
        except (BookkeeperError, ValueError) as exc:
            decoded.refused.append(str(exc))
            decoded.refused_samples += len(series.samples) + len(series.histograms)
            continue
        count = len(series.samples)
        name_ids.extend([names.setdefault(name, len(names))] * count)
        set_ids.extend([label_sets.setdefault(label_set, len(label_sets))] * count)
        for sample in series.samples:
            values.append(sample.value)
            timestamps.append(sample.timestamp)
    times = np.array(timestamps, dtype=np.int64)
    decoded.batch = SampleBatch(
        context=context,
        snapshot_ms=int(times.max()) if len(times) else 0,
        common_labels={},
        names=list(names),
        label_sets=list(label_sets),
        name_ids=np.array(name_ids, dtype=np.int32),
        label_set_ids=np.array(set_ids, dtype=np.int32),
        types=np.full(len(values), VarType.DOUBLE, dtype=np.uint8),
        values=np.array(values, dtype=np.float64).view(np.int64),
        timestamps=times,
    )
    return decoded
